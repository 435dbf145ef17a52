"""Samza's task.transactional.state.* keys in a ported job: Samsa's checkpoints and restores are always
transactional, so the two switches accept true only; retain.existing.state is Samsa's too."""

from __future__ import annotations

import pytest

from samsa.runtime.config.config import Config
from samsa.runtime.config.keys import RETAIN_EXISTING_STATE
from samsa.runtime.exceptions import ConfigError

BASE = {
    "job.name": "ported",
    "task.class": "samsa.examples.wordcount.task:WordCount",
    "task.inputs": "kafka.words",
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "127.0.0.1:1",
}
SWITCHES = ("task.transactional.state.checkpoint.enabled", "task.transactional.state.restore.enabled")


@pytest.mark.parametrize("key", SWITCHES)
def test_samzas_transactional_switches_accept_true(key: str) -> None:
    assert Config({**BASE, key: "true"}).value(key) is True
    assert Config(BASE).value(key) is True


@pytest.mark.parametrize("key", SWITCHES)
def test_samzas_transactional_switches_refuse_false_saying_samsa_is_always_transactional(key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Config({**BASE, key: "false"})
    message = str(refused.value)
    assert f"{key}=false" in message and "always transactional" in message, message
    assert "unknown config key" not in message and "remove the key or set it to true" in message, message


def test_retain_existing_state_takes_true_false_or_nothing() -> None:
    assert Config(BASE).value(RETAIN_EXISTING_STATE) is None
    assert Config({**BASE, RETAIN_EXISTING_STATE: "true"}).value(RETAIN_EXISTING_STATE) is True
    assert Config({**BASE, RETAIN_EXISTING_STATE: "false"}).value(RETAIN_EXISTING_STATE) is False
    with pytest.raises(ConfigError, match=RETAIN_EXISTING_STATE):
        Config({**BASE, RETAIN_EXISTING_STATE: "maybe"})
