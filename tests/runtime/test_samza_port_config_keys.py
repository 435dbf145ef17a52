"""A job config ported from Samza: its well-known keys Samsa has no use for are named with what to do
instead, and every wrong key of a file is named in one error, not one per run."""

from __future__ import annotations

import pytest

from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.exceptions import ConfigError

BASE = {
    "job.name": "wikipedia-feed",
    "task.class": "mytasks:Feed",
    "task.inputs": "kafka.wikipedia-raw",
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "localhost:9092",
}


def config_error(raw: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        Config({**BASE, **raw})
    return str(info.value)


@pytest.mark.parametrize(
    ("key", "value", "instead"),
    [
        ("task.ignored.exceptions", "*", "inside process()"),
        ("task.drop.serialization.errors", "true", "collector.send()"),
        ("task.drop.producer.errors", "true", "restarts from its last commit"),
        ("job.default.system", "kafka", "<system>.<stream> in task.inputs"),
        ("job.coordinator.replication.factor", "1", "default.replication.factor"),
        ("systems.kafka.consumer.zookeeper.connect", "localhost:2181/", "systems.kafka.bootstrap.servers"),
        ("systems.kafka.default.stream.samza.offset.default", "oldest", "systems.kafka.samza.offset.default"),
        ("systems.kafka.default.stream.replication.factor", "1", "changelog.replication.factor"),
        ("metrics.reporter.snapshot.stream", "kafka.metrics", "metrics.prometheus.port"),
        ("yarn.package.path", "file:///job.tar.gz", "job.deploy"),
        ("yarn.container.count", "4", "job.container.count"),
        ("yarn.am.container.memory.mb", "1024", "job.deploy"),
        ("job.coordinator.monitor-input-regex-frequency.ms", "1000", "regex are not supported"),
        ("streams.anything.samza.key.serde", "string", "systems.<sys>.streams.<stream>.samza.<setting>"),
    ],
)
def test_well_known_samza_keys_are_named_as_unsupported_with_what_to_do(
    key: str, value: str, instead: str
) -> None:
    message = config_error({key: value})
    assert message.startswith(f"{key} is a Samza key not supported by Samsa: "), message
    assert instead in message and "unknown config key" not in message


@pytest.mark.parametrize(
    ("key", "advice"),
    [
        ("systems.events.default.stream.samza.offset.default", "set systems.events.samza.offset.default;"),
        ("systems.events.consumer.zookeeper.connect", "systems.events.bootstrap.servers;"),
        # A placeholder the key does not have stays as written.
        ("systems.events.default.stream.replication.factor", "stores.<s>.changelog.replication.factor"),
    ],
)
def test_the_advice_names_the_system_of_the_key_given_not_a_placeholder(key: str, advice: str) -> None:
    message = config_error({key: "1"})
    assert advice in message and "<sys>" not in message, message


# -- Samza's stream-id keys (streams.<id>.*) -----------------------------------------------------------------

STREAMS = {
    "task.inputs": "kafka.wikipedia-raw,kafka.table",
    "task.outputs": "kafka.edits",
    "task.broadcast.inputs": "kafka.rules#0",
    "stores.kv.factory": "inmemory",
    "stores.kv.changelog": "kafka.kv-log",
    "systems.other.samza.factory": "kafka",
    "systems.other.bootstrap.servers": "localhost:9093",
}


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("streams.table.samza.bootstrap", "systems.kafka.streams.table.samza.bootstrap"),
        (
            "streams.wikipedia-raw.samza.offset.default",
            "systems.kafka.streams.wikipedia-raw.samza.offset.default",
        ),
        ("streams.table.samza.reset.offset", "systems.kafka.streams.table.samza.reset.offset"),
        ("streams.edits.samza.msg.serde", "systems.kafka.streams.edits.samza.msg.serde"),
        ("streams.rules.samza.key.serde", "systems.kafka.streams.rules.samza.key.serde"),
        ("streams.kv-log.samza.key.serde", "systems.kafka.streams.kv-log.samza.key.serde"),
    ],
)
def test_a_stream_id_key_naming_one_stream_of_the_job_gives_the_key_to_write(key: str, instead: str) -> None:
    message = config_error({**STREAMS, key: "true"})
    assert message.startswith(f"{key} is a Samza key not supported by Samsa: "), message
    assert f"write {instead} instead" in message


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        # A per-stream key Samsa refuses too: its own advice, not a key that would be refused in turn.
        (
            "streams.table.samza.priority",
            "systems.kafka.streams.table.samza.priority is not supported either: inputs are read round-robin",
        ),
        (
            "streams.table.samza.broadcast",
            "list kafka.table#[<first>-<last partition>] in task.broadcast.inputs",
        ),
        (
            "streams.table.samza.delete.committed.messages",
            "no per-stream setting samza.delete.committed.messages",
        ),
    ],
)
def test_a_stream_id_setting_samsa_lacks_per_stream_is_not_sent_to_another_refusal(
    key: str, instead: str
) -> None:
    message = config_error({**STREAMS, key: "1"})
    assert instead in message and " write " not in message, message


def test_a_stream_id_resolved_by_its_physical_name_and_system() -> None:
    message = config_error(
        {
            **STREAMS,
            "streams.raw.samza.system": "kafka",
            "streams.raw.samza.physical.name": "wikipedia-raw",
            "streams.raw.samza.bootstrap": "true",
        }
    )
    first, *lines = message.splitlines()
    assert "3 keys of the job config are wrong" in first
    by_key = {line.split(" ")[3]: line for line in lines}
    # The stream is named by <system>.<stream> in task.inputs: these keys have no counterpart.
    for key in ("streams.raw.samza.system", "streams.raw.samza.physical.name"):
        assert "<system>.<stream> in task.inputs (and task.outputs), here kafka.wikipedia-raw" in by_key[key]
    assert (
        "write systems.kafka.streams.wikipedia-raw.samza.bootstrap instead"
        in by_key["streams.raw.samza.bootstrap"]
    )


@pytest.mark.parametrize(
    ("keys", "why"),
    [
        ({"streams.nothere.samza.bootstrap": "true"}, "(no stream of the job is named 'nothere')"),
        (
            {"streams.table.samza.bootstrap": "true", "task.outputs": "other.table"},
            "('table' names streams on several systems: kafka.table, other.table)",
        ),
        # Not a samza.* setting (Samza passes it to the system): the general form only.
        ({"streams.table.cleanup.policy": "compact"}, "the stream being <sys>.<stream> in task.inputs"),
    ],
)
def test_a_stream_id_naming_no_single_stream_gets_the_general_form(keys: dict[str, str], why: str) -> None:
    message = config_error({**STREAMS, **keys})
    assert "write its settings as systems.<sys>.streams.<stream>.samza.<setting>" in message, message
    assert why in message


def test_no_samsa_key_is_under_streams() -> None:
    # The whole streams. namespace is Samza's stream-id form: none of Samsa's keys may sit there.
    from samsa.runtime.config.config import default_registry

    under = [
        k.pattern for k in default_registry().keys if k.pattern.startswith("streams") and not k.unsupported
    ]
    assert under == []


def test_keys_outside_samsas_prefixes_other_than_yarn_stay_the_tasks_own() -> None:
    config = Config({**BASE, "app.yarn.count": "4", "yarn": "x", "wordcount.output.stream": "out"})
    assert config["app.yarn.count"] == "4"


def test_every_wrong_key_of_a_ported_config_is_named_in_one_error() -> None:
    message = config_error(
        {
            "job.default.system": "kafka",
            "job.coordinator.replication.factor": "1",
            "task.comit.ms": "1000",
            "task.window.ms": "soon",
        }
    )
    first, *lines = message.splitlines()
    # The first line names them all (a log line read alone), in the file's order.
    assert first == (
        "4 keys of the job config are wrong (job.default.system, job.coordinator.replication.factor, "
        "task.comit.ms, task.window.ms):"
    )
    assert len(lines) == 4
    assert lines[0].startswith("  - job.default.system is a Samza key not supported by Samsa: ")
    assert lines[1].startswith(
        "  - job.coordinator.replication.factor is a Samza key not supported by Samsa: "
    )
    assert lines[2] == "  - unknown config key 'task.comit.ms'; did you mean 'task.commit.ms'?"
    assert lines[3].startswith("  - task.window.ms='soon' is not an integer")


def test_a_single_wrong_key_reads_as_before() -> None:
    assert (
        config_error({"task.comit.ms": "1"})
        == "unknown config key 'task.comit.ms'; did you mean 'task.commit.ms'?"
    )


def test_samsa_run_names_every_wrong_key_and_exits_as_for_one(tmp_path, caplog) -> None:
    job = tmp_path / "job.properties"
    lines = {**BASE, "job.default.system": "kafka", "job.coordinator.replication.factor": "1"}
    job.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    status = main(["run", str(job)])
    job.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "job.default.system": "kafka"}.items()))
    assert main(["run", str(job)]) == status != 0
    err = caplog.text
    assert (
        "2 keys of the job config are wrong (job.default.system, job.coordinator.replication.factor)" in err
    )
