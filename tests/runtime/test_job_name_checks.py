"""`job.name` and `job.id` name the job's topics and its state and lock dirs: characters Kafka topic names
or paths refuse, and names too long for a topic, are refused when the config is read."""

from __future__ import annotations

import pytest

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import coordinator_topic
from samsa.runtime.exceptions import ConfigError

BASE = {
    "task.class": "samsa.runtime.task:StreamTask",
    "task.inputs": "kafka.names-in",
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "localhost:9092",
}


def job(name: str, job_id: str = "1", **extra: str) -> JobConfig:
    return JobConfig(Config({**BASE, "job.name": name, "job.id": job_id, **extra}))


@pytest.mark.parametrize(
    "name", ["../../../escaped", "a/b", "my job", "wörter", "tab\tname", "semi;colon", "..\\up"]
)
def test_a_job_name_with_characters_topics_or_paths_refuse_is_refused(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        job(name)
    assert str(info.value).startswith(
        f"job.name={name!r} may hold only ASCII letters, digits, '.', '_' and '-'"
    )


@pytest.mark.parametrize("job_id", ["blue green", "ü1", "1/2", ""])
def test_a_job_id_with_characters_topics_or_paths_refuse_is_refused(job_id: str) -> None:
    with pytest.raises(ConfigError) as info:
        job("names", job_id)
    assert str(info.value).startswith(
        f"job.id={job_id!r} may hold only ASCII letters, digits, '.', '_' and '-'"
    )


@pytest.mark.parametrize(("name", "job_id"), [("word.count_v2-eu", "1"), ("wc", "blue_2.a"), ("wc", "b-1")])
def test_names_of_letters_digits_dots_underscores_and_dashes_pass(name: str, job_id: str) -> None:
    # A '-' in job.id passes here: the coordinator refuses it for a new job only (test_job_config_refusals).
    config = job(name, job_id)
    assert (config.name, config.id) == (name, job_id)


def test_the_longest_name_whose_topics_kafka_takes_passes_and_one_more_character_is_refused() -> None:
    # The checkpoint topic, `__samsa_checkpoint_ver_1_for_<name>_<id>`, is the longest Samsa names.
    longest = "n" * (249 - len(checkpoint_topic("", "1")))
    config = job(longest)
    assert len(checkpoint_topic(config.name, config.id)) == 249
    assert len(coordinator_topic(config)) < 249
    with pytest.raises(ConfigError) as info:
        job(longest + "n")
    message = str(info.value)
    assert "250 characters long, past Kafka's limit of 249 characters for a topic name" in message
    assert f"at most {len(longest) + 1} characters together" in message
    assert "__samsa_checkpoint_ver_1_for_nnn" in message


def test_a_long_job_id_counts_too() -> None:
    with pytest.raises(ConfigError, match="past Kafka's limit of 249"):
        job("wc", "7" * 230)
