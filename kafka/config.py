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


_KEYSTORE_PKCS12 = (
    "convert a JKS keystore (keytool -importkeystore -srckeystore <k>.jks -destkeystore <k>.p12 "
    "-deststoretype PKCS12) for ssl.keystore.location with ssl.keystore.password, or set "
    "ssl.certificate.location and ssl.key.location (PEM files) instead"
)
_JAVA_ONLY = "a Java client setting with no librdkafka equivalent: remove it"
#: Settings of Kafka's Java client (Samza's) that librdkafka does not take, each with what to set instead.
JAVA_SETTINGS: Mapping[str, str] = {
    "sasl.jaas.config": (
        "librdkafka takes no JAAS line: set sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, as the "
        "login module's), sasl.username and sasl.password (the line's username and password); Kerberos: "
        "sasl.kerberos.service.name, sasl.kerberos.keytab and sasl.kerberos.principal; OAuth: "
        "sasl.oauthbearer.*"
    ),
    "sasl.login.class": "a Java class: use sasl.mechanism with sasl.username and sasl.password",
    "sasl.login.callback.handler.class": "a Java class: use sasl.mechanism with sasl.username and "
    "sasl.password, or sasl.oauthbearer.* for OAuth",
    "sasl.client.callback.handler.class": "a Java class: use sasl.mechanism with sasl.username and "
    "sasl.password, or sasl.oauthbearer.* for OAuth",
    "ssl.truststore.location": (
        "librdkafka reads no Java truststore: set ssl.ca.location to the CA certificates as a PEM file "
        "(keytool -exportcert -rfc -keystore <truststore>.jks -alias <ca> -file ca.pem)"
    ),
    "ssl.truststore.password": "a Java truststore's: remove it (ssl.ca.location, a PEM file, has none)",
    "ssl.truststore.type": "a Java truststore's: remove it (ssl.ca.location takes a PEM file)",
    "ssl.keystore.type": f"librdkafka's ssl.keystore.location is PKCS#12 only: remove it; {_KEYSTORE_PKCS12}",
    "ssl.protocol": "librdkafka negotiates the TLS version itself: remove it",
    "ssl.enabled.protocols": "librdkafka negotiates the TLS version itself: remove it",
    "ssl.trustmanager.algorithm": _JAVA_ONLY,
    "ssl.keymanager.algorithm": _JAVA_ONLY,
    "ssl.provider": _JAVA_ONLY,
    "ssl.secure.random.implementation": _JAVA_ONLY,
}
_SECRET_HINTS = ("password", "secret", "jaas", "sasl.oauthbearer.config")


def java_settings(given: Mapping[str, Any], reason: str) -> dict[str, str]:
    """The Kafka Java client's settings among `given` that librdkafka refuses, each with what to set instead;
    `ssl.keystore.location` among them when librdkafka could not read it as PKCS#12 (a JKS keystore)."""
    found = {key: JAVA_SETTINGS[key] for key in given if key in JAVA_SETTINGS}
    if "ssl.keystore.location" in given and "PKCS#12" in reason:
        found["ssl.keystore.location"] = f"librdkafka reads it as PKCS#12, not JKS: {_KEYSTORE_PKCS12}"
    return found


def without_secrets(text: str, given: Mapping[str, Any]) -> str:
    """`text` (librdkafka's refusal) with the value of every secret-like setting of `given` masked."""
    for key, value in given.items():
        if any(hint in key for hint in _SECRET_HINTS) and str(value):
            text = text.replace(str(value), "***")
    return text


def with_defaults(config: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with every key of `defaults` it does not set itself."""
    merged = dict(defaults)
    merged.update(config)
    return merged
