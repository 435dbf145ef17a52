"""Every numeric config key has bounds: a negative duration or count is refused unless -1 means something."""

from __future__ import annotations

import re

import pytest

from samsa.runtime.config.config import Config, default_registry
from samsa.runtime.config.registry import Key
from samsa.runtime.exceptions import ConfigError

INT_KEYS = [
    key for key in default_registry().keys if key.type == "int" and not key.unsupported and not key.not_yet
]
BASE = {
    "job.name": "j",
    "task.class": "samsa.runtime.task:StreamTask",
    "task.inputs": "kafka.in",
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "localhost:9092",
}


def concrete(pattern: str) -> str:
    return re.sub(r"<[a-z]+>", "x", pattern)


def refusal(key: Key, raw: str) -> str:
    with pytest.raises(ConfigError) as info:
        key.parse(concrete(key.pattern), raw)
    return str(info.value)


@pytest.mark.parametrize("key", INT_KEYS, ids=lambda key: key.pattern)
def test_every_int_key_has_a_lower_bound_and_its_default_within_range(key: Key) -> None:
    assert key.minimum is not None and key.minimum >= 0, f"{key.pattern}: a negative count or duration"
    if key.default is not None:
        key.parse(key.pattern, key.default)


@pytest.mark.parametrize("key", INT_KEYS, ids=lambda key: key.pattern)
def test_below_the_minimum_is_refused_naming_key_value_and_range(key: Key) -> None:
    assert key.minimum is not None
    for value in {key.minimum - 1, -5}:
        if value == -1 and key.special_minus_one is not None:
            assert key.parse(key.pattern, "-1") == -1
            continue
        message = refusal(key, str(value))
        assert message == f"{concrete(key.pattern)}={str(value)!r} must be {key.allowed_range}"
        assert str(key.minimum) in message
    if key.maximum is not None:
        assert str(key.maximum) in refusal(key, str(key.maximum + 1))
        assert key.parse(key.pattern, str(key.maximum)) == key.maximum


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("task.commit.timeout.ms", "-5", "task.commit.timeout.ms='-5' must be at least 1"),
        ("task.commit.timeout.ms", "0", "task.commit.timeout.ms='0' must be at least 1"),
        ("task.commit.max.delay.ms", "-5", "task.commit.max.delay.ms='-5' must be at least 0"),
        ("metrics.prometheus.port", "65536", "metrics.prometheus.port='65536' must be between 0 and 65535"),
        (
            "stores.s.changelog.replication.factor",
            "0",
            "stores.s.changelog.replication.factor='0' must be between 1 and 32767, "
            "or -1 for the broker's default",
        ),
        ("task.commit.ms", "-5", "task.commit.ms='-5' must be at least 1, or -1 to turn it off"),
    ],
)
def test_a_job_config_out_of_range_fails_at_load(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Config({**BASE, key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("task.commit.max.delay.ms", "0"),
        ("task.commit.timeout.ms", "1"),
        ("stores.s.changelog.replication.factor", "-1"),
        ("stores.s.changelog.replication.factor", "3"),
        ("metrics.prometheus.port", "0"),
    ],
)
def test_values_in_range_load(key: str, value: str) -> None:
    assert Config({**BASE, key: value}).value(key) == int(value)


def test_config_keys_shows_each_int_keys_range() -> None:
    table = default_registry().render()
    assert "task.commit.timeout.ms  <int: at least 1> [default: 1800000]" in table
    assert "task.commit.ms  <int: at least 1, or -1 to turn it off> [default: 60000]" in table
