"""Job configs refused at start with the key at fault named, and blank values read as unset."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from job_fixtures import run_in_process

from samsa.exceptions import InvalidConfigError
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw
from samsa.runtime.coordinator import JobCoordinator, coordinator_topic
from samsa.runtime.validation import check_job


def job_dict(**extra: str) -> dict[str, str]:
    """An at-least-once job reading kafka.sin, plus `extra` keys (`__` for dots)."""
    config = {
        "job.name": "refusals",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.sin",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "systems.kafka.samza.key.serde": "string",
        "systems.kafka.samza.msg.serde": "string",
        "stores.kv.factory": "rocksdb",
        "stores.kv.key.serde": "string",
        "stores.kv.msg.serde": "string",
    }
    config.update({k.replace("__", "."): v for k, v in extra.items()})
    return config


def refused(raw: dict[str, str], start: Callable[[JobConfig], Any] = check_job) -> str:
    """The message of the config error building and checking the job fails with."""
    with pytest.raises(InvalidConfigError) as info:
        start(JobConfig(Config(raw)))
    return str(info.value)


# -- job.id -----------------------------------------------------------------------------------------------


def test_a_new_job_with_a_dash_in_its_id_is_refused_as_it_could_share_its_names_with_another_job(
    job_config: Callable[..., dict[str, str]], topics: Callable[..., str], kafka_admin: Any
) -> None:
    # The reviewer's pair: job fa/b-1 and job fa-b/1 fenced each other (both fa-b-1).
    config = job_config(f"kafka.{topics()}", "unused", **{"job.id": "b-1"})
    name = config["job.name"]
    job = JobConfig(Config(config))
    message = refused(config, lambda job: JobCoordinator(job).prepare())
    assert message.startswith("job.id='b-1' contains '-'")
    assert f"job.name={name}-b with job.id=1 are both {name}-b-1" in message
    assert "this job has not run yet: use '_' or '.' instead, e.g. job.id=b_1" in message
    assert coordinator_topic(job) not in kafka_admin.metadata().topics, "a refused start creates nothing"


def test_a_job_that_ran_under_a_dashed_id_keeps_it_with_a_warning(
    job_config: Callable[..., dict[str, str]],
    topics: Callable[..., str],
    kafka_admin: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Refusing it would strand its checkpoints and state (a new id starts the job over) and the tools that
    # read them (samsa eos retire with the old config).
    config = job_config(f"kafka.{topics()}", "unused", **{"job.id": "blue-1"})
    job = JobConfig(Config(config))
    kafka_admin.create_topic(coordinator_topic(job), 1, {"cleanup.policy": "compact"})
    JobCoordinator(job).prepare()
    assert "job.id='blue-1' contains '-'" in caplog.text
    assert "has run before, so it keeps its job.id" in caplog.text


@pytest.mark.parametrize(("name", "job_id"), [("fa-b", "1"), ("fa", "b_1"), ("fa", "b.1"), ("fa", "007")])
def test_job_keys_without_a_dash_in_the_id_are_kept_and_tell_jobs_apart(name: str, job_id: str) -> None:
    job = JobConfig(Config(job_dict(**{"job.name": name, "job.id": job_id})))
    assert job.job_key == f"{name}-{job_id}"
    assert job.job_key.rpartition("-") == (name, "-", job_id)


# -- samza.intermediate -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", ["mid", "sin", "sent-unlisted"])
def test_an_intermediate_stream_in_an_at_least_once_job_is_refused(stream: str) -> None:
    # The reviewer's upstream wrote kafka.mid without the exactly-once header; its downstream failed later.
    key = f"systems.kafka.streams.{stream}.samza.intermediate"
    message = refused(job_dict(task__outputs="kafka.mid", **{key: "true"}), start=lambda job: None)
    assert message.startswith(f"{key}=true: an intermediate stream links two exactly-once Samsa jobs")
    assert "set job.processing.guarantee=exactly_once, or remove the key" in message


def test_intermediate_false_in_an_at_least_once_job_passes() -> None:
    check_job(JobConfig(Config(job_dict(systems__kafka__streams__sin__samza__intermediate="false"))))


# -- serde names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "systems.kafka.streams.out.samza.msg.serde",  # sent to, not in task.outputs (the reviewer's case)
        "systems.kafka.streams.out.samza.key.serde",
        "systems.kafka.streams.my.dotted.samza.msg.serde",
        "systems.other.samza.msg.serde",  # a system no stream of the job is on
        "systems.other.samza.key.serde",
    ],
)
def test_an_unknown_serde_on_any_serde_key_fails_at_start_naming_the_key(key: str) -> None:
    extra = {"systems.other.samza.factory": "kafka", "systems.other.bootstrap.servers": "localhost:9093"}
    message = refused(job_dict(**extra, **{key: "bytez"}))
    assert message.startswith(f"{key}=bytez: unknown serde 'bytez': known serdes are ")
    assert "bytes, integer, json, long, string" in message


def test_known_serdes_on_streams_outside_the_job_and_blank_ones_pass() -> None:
    raw = job_dict(
        systems__kafka__streams__out__samza__msg__serde="bytes",
        systems__kafka__streams__out__samza__key__serde="",
        serializers__registry__mine__class="json",
        systems__kafka__streams__other__samza__msg__serde="mine",
    )
    check_job(JobConfig(Config(raw)))


def test_blank_serde_keys_are_unset() -> None:
    job = JobConfig(
        Config(
            job_dict(systems__kafka__samza__msg__serde="", systems__kafka__streams__sin__samza__key__serde="")
        )
    )
    check_job(job)
    settings = job.stream(job.inputs[0])
    assert (settings.key_serde, settings.msg_serde) == ("string", "bytes")


# -- blank stream-valued keys -----------------------------------------------------------------------------


def test_a_blank_changelog_in_a_properties_file_means_none(tmp_path: Path) -> None:
    # The reviewer's f8: `stores.kv.changelog=` failed as "'' is not <system>.<stream>".
    path = tmp_path / "job.properties"
    lines = [f"{k}={v}" for k, v in job_dict().items()] + ["stores.kv.changelog="]
    path.write_text("\n".join(lines) + "\n")
    job = JobConfig(Config(load_raw(path)))
    check_job(job)
    assert set(job.systems) == {"kafka"}


def test_a_blank_changelog_beside_an_adjunct_input_and_a_blank_adjunct_input_mean_none() -> None:
    job = JobConfig(
        Config(
            job_dict(
                stores__ref__factory="inmemory",
                stores__ref__adstore__input="kafka.ref",
                stores__ref__changelog="",
                stores__kv__adstore__input=" ",
            )
        )
    )
    check_job(job)
    assert list(job.adjunct_inputs) == ["ref"]


# -- librdkafka settings ----------------------------------------------------------------------------------


def test_acks_1_names_the_key_and_says_samsa_turns_idempotence_on() -> None:
    # The reviewer's f5: the error named `systems.kafka.producer.*` and a setting the user never set.
    message = refused(
        job_dict(systems__kafka__producer__acks="1"),
        start=lambda job: JobCoordinator(job).check_client_settings(),
    )
    assert message.startswith("systems.kafka.producer.acks: librdkafka rejects it")
    assert "Samsa turns enable.idempotence on for its producers" in message
    assert "set systems.kafka.producer.enable.idempotence=false" in message


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"systems.kafka.producer.acks": "1"}, "systems.kafka.producer.acks"),
        (
            {"systems.kafka.producer.acks": "1", "systems.kafka.producer.enable.idempotence": "false"},
            "systems.kafka.producer.enable.idempotence",
        ),
    ],
)
def test_acks_1_in_an_exactly_once_job_is_refused_at_start(extra: dict[str, str], key: str) -> None:
    raw = job_dict(
        **{"job.processing.guarantee": "exactly_once", "task.outputs": "kafka.out", "task.commit.ms": "1000"},
        **extra,
    )
    message = refused(raw, start=lambda job: JobCoordinator(job).check_client_settings())
    assert message.startswith(f"{key}: librdkafka rejects it")
    assert "exactly_once writes the outputs in Kafka transactions" in message


def test_a_conflict_of_two_keys_the_user_set_names_both() -> None:
    raw = job_dict(
        systems__kafka__producer__transactional__id="mine",
        systems__kafka__producer__enable__idempotence="false",
    )
    message = refused(raw, start=lambda job: JobCoordinator(job).check_client_settings())
    assert message.startswith(
        "systems.kafka.producer.transactional.id, systems.kafka.producer.enable.idempotence: librdkafka "
    )
    assert "Samsa turns" not in message


def test_acks_1_without_idempotence_runs(
    job_config: Callable[..., dict[str, str]],
    topics: Callable[..., str],
    produce: Callable[..., None],
    read_topic: Callable[..., list[Any]],
) -> None:
    # What the acks=1 error advises must run: the outputs go with acks=1, the checkpoints still commit.
    source, sink = topics(), topics()
    produce(source, [("k", "v1"), ("k", "v2")])
    config = job_config(
        f"kafka.{source}",
        sink,
        **{"systems.kafka.producer.acks": "1", "systems.kafka.producer.enable.idempotence": "false"},
    )
    run_in_process(config)
    assert [v for *_, v in read_topic(sink)] == [b"v1", b"v2"]
    run_in_process(config)  # resumes from its checkpoint: nothing again
    assert len(read_topic(sink)) == 2


@pytest.mark.parametrize(
    ("extra", "named", "instead"),
    [
        (
            {
                "systems.kafka.consumer.sasl.jaas.config": "org.apache.kafka.common.security.plain."
                'PlainLoginModule required username="alice" password="JAASSECRET";'
            },
            ["systems.kafka.consumer.sasl.jaas.config"],
            "sasl.mechanism",
        ),
        (
            {
                "systems.kafka.producer.ssl.truststore.location": "/etc/kafka/truststore.jks",
                "systems.kafka.producer.ssl.truststore.password": "TRUSTSECRET",
            },
            [
                "systems.kafka.producer.ssl.truststore.location",
                "systems.kafka.producer.ssl.truststore.password",
            ],
            "ssl.ca.location",
        ),
        (
            {"systems.kafka.consumer.ssl.keystore.type": "JKS"},
            ["systems.kafka.consumer.ssl.keystore.type"],
            "ssl.certificate.location and ssl.key.location",
        ),
    ],
)
def test_samzas_java_security_keys_are_named_with_their_librdkafka_equivalent(
    extra: dict[str, str], named: list[str], instead: str
) -> None:
    # R6 #5: the refusal named `systems.kafka.consumer.*`, not the Java key, and said nothing of what to set.
    message = refused(
        job_dict(**extra),
        start=lambda job: JobCoordinator(job).check_client_settings(),
    )
    assert all(key in message for key in named), message
    assert instead in message and "*" not in message.split(":")[0]
    assert "SECRET" not in message


def test_a_jks_keystore_is_named_as_not_pkcs12(tmp_path: Path) -> None:
    jks = tmp_path / "keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed not a PKCS#12 file")
    message = refused(
        job_dict(
            **{
                "systems.kafka.consumer.security.protocol": "SSL",
                "systems.kafka.consumer.ssl.keystore.location": str(jks),
                "systems.kafka.consumer.ssl.keystore.password": "KEYSECRET",
            }
        ),
        start=lambda job: JobCoordinator(job).check_client_settings(),
    )
    assert message.startswith("systems.kafka.consumer.ssl.keystore.location: librdkafka reads it as PKCS#12")
    assert "SECRET" not in message
