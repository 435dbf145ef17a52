"""librdkafka client configuration: the defaults Samsa applies and the bootstrap helper."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from samsa.kafka.exceptions import KafkaConfigError

LIBRDKAFKA_LOG = logging.getLogger("samsa.kafka.librdkafka")
"""librdkafka's own log lines go here instead of stderr."""

CONSUMER_DEFAULTS: Mapping[str, Any] = {
    # Required by librdkafka but unused: Samsa only assign()s partitions and keeps offsets in checkpoints.
    "group.id": "samsa-assign-only",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
    # Bounded prefetch per consumer; the dev broker answers empty fetches at once, so a small queue suffices.
    "queued.max.messages.kbytes": 16384,
    # The dev broker ignores fetch.max.bytes and may answer with very large fetch responses.
    "receive.message.max.bytes": 2000000000,
    "auto.offset.reset": "earliest",
}

PRODUCER_DEFAULTS: Mapping[str, Any] = {
    "enable.idempotence": True,
    # Same partition for a key as the Java client (Samza jobs and Kafka Streams agree on it).
    "partitioner": "murmur2_random",
    "linger.ms": 5,
    # Success costs no callback; failures still reach the delivery callback and fail the task.
    "delivery.report.only.error": True,
}


#: librdkafka's consumer-only properties (scope C in its CONFIGURATION.md, 2.x): a producer-type client (the
#: admin client is one) logs a CONFWARN for each and ignores it.
CONSUMER_ONLY_KEYS: frozenset[str] = frozenset(
    {
        "group.id",
        "group.instance.id",
        "partition.assignment.strategy",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "group.protocol.type",
        "group.protocol",
        "group.remote.assignor",
        "coordinator.query.interval.ms",
        "max.poll.interval.ms",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "fetch.wait.max.ms",
        "fetch.queue.backoff.ms",
        "fetch.message.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "fetch.error.backoff.ms",
        "offset.store.method",
        "isolation.level",
        "consume_cb",
        "rebalance_cb",
        "offset_commit_cb",
        "on_commit",
        "enable.partition.eof",
        "check.crcs",
        "consume.callback.max.messages",
        "auto.offset.reset",
        "auto.commit.enable",
        "offset.store.path",
        "offset.store.sync.interval.ms",
    }
)


def admin_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` (a system's consumer settings, say) without the consumer-only keys, for an admin client:
    bootstrap servers, security (`security.protocol`, `ssl.*`, `sasl.*`) and the other client keys stay."""
    # Leaving out only what an admin cannot use (not keeping a list of what it can) never drops a setting
    # it needs to reach the cluster.
    return {key: value for key, value in config.items() if key not in CONSUMER_ONLY_KEYS}


def client_config(bootstrap_servers: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A librdkafka config for `bootstrap_servers` plus `overrides` (which win)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    if overrides:
        config.update(overrides)
    return config


def rejected_setting(error: Exception) -> KafkaConfigError:
    """librdkafka's refusal of a setting at client creation, as an error naming the setting."""
    reason = str(error.args[0].str()) if error.args and hasattr(error.args[0], "str") else str(error)
    match = re.search(r'property: "([^"]+)"|"([^"]+)"', reason)
    return KafkaConfigError(next((g for g in match.groups() if g), None) if match else None, reason)


def with_defaults(config: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with every key of `defaults` it does not set itself."""
    merged = dict(defaults)
    merged.update(config)
    return merged
