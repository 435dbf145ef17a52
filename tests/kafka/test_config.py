"""Client config helpers: defaults apply unless the caller sets the key."""

from __future__ import annotations

from samsa.kafka import client_config
from samsa.kafka.config import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS, with_defaults


def test_client_config_overrides_win() -> None:
    assert client_config("h:1", {"linger.ms": 50}) == {"bootstrap.servers": "h:1", "linger.ms": 50}
    assert client_config("h:1", {"bootstrap.servers": "other:2"}) == {"bootstrap.servers": "other:2"}
    assert client_config("h:1") == {"bootstrap.servers": "h:1"}


def test_consumer_defaults_apply_unless_given() -> None:
    merged = with_defaults({"enable.partition.eof": True, "x": 1}, CONSUMER_DEFAULTS)
    assert merged["enable.partition.eof"] is True
    assert merged["enable.auto.commit"] is False
    assert merged["enable.auto.offset.store"] is False
    assert merged["queued.max.messages.kbytes"] == 16384
    assert merged["auto.offset.reset"] == "earliest"
    assert merged["x"] == 1


def test_producer_defaults() -> None:
    merged = with_defaults({"linger.ms": 0}, PRODUCER_DEFAULTS)
    assert merged["partitioner"] == "murmur2_random"
    assert merged["enable.idempotence"] is True
    assert merged["delivery.report.only.error"] is True
    assert merged["linger.ms"] == 0
