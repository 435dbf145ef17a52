"""`samsa checkpoint show|reset` and `samsa run` config errors, through the CLI on the real broker."""

from __future__ import annotations

import os
import time

import pytest
from job_files import checkpointed_offsets, write_job_file

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import pid_dir
from samsa.runtime.coordinator import JobCoordinator, client_config, coordinator_topic
from samsa.streams import SystemStreamPartition


def test_show_prints_offsets_and_lag(job_config, topics, produce, run_job, tmp_path, capsys):
    inp = topics(2)
    produce(inp, [(None, str(i)) for i in range(5)], partition=0)
    config = job_config(f"kafka.{inp}", topics(1))
    run_job(config)
    produce(inp, [(None, "late")], partition=0)
    assert main(["checkpoint", "show", str(write_job_file(tmp_path, config))]) == 0
    out = capsys.readouterr().out
    assert f"kafka.{inp}#0  offset 5  high watermark 6  lag 1" in out
    assert f"kafka.{inp}#1  offset 0  high watermark 0  lag 0" in out


def test_reset_to_earliest_latest_and_a_time(job_config, topics, produce, run_job, tmp_path):
    inp = topics(1)
    produce(inp, [(None, str(i)) for i in range(3)])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(inp, [(None, str(i)) for i in range(3, 6)])
    config = job_config(f"kafka.{inp}", topics(1))
    run_job(config)
    ssp = SystemStreamPartition("kafka", inp, 0)
    job_file = write_job_file(tmp_path, config)
    assert checkpointed_offsets(config)["Partition 0"] == {ssp: 6}
    assert main(["checkpoint", "reset", "--to", "earliest", str(job_file)]) == 0
    assert checkpointed_offsets(config)["Partition 0"] == {ssp: 0}
    assert main(["checkpoint", "reset", "--to", "latest", str(job_file)]) == 0
    assert checkpointed_offsets(config)["Partition 0"] == {ssp: 6}
    assert main(["checkpoint", "reset", "--to", str(middle), str(job_file)]) == 0
    assert checkpointed_offsets(config)["Partition 0"] == {ssp: 3}


def test_reset_is_refused_while_the_job_runs(job_config, topics, tmp_path, caplog):
    config = job_config(f"kafka.{topics(1)}", topics(1))
    job = JobConfig(Config(config))
    pid_dir(job).mkdir(parents=True)
    (pid_dir(job) / "container-0.pid").write_text(str(os.getpid()))
    assert main(["checkpoint", "reset", "--to", "earliest", str(write_job_file(tmp_path, config))]) == 2
    assert "is running" in caplog.text and "container-0" in caplog.text


def test_reset_after_rerun_reprocesses_from_the_start(
    job_config, topics, produce, read_topic, run_job, tmp_path
):
    inp, out = topics(1), topics(1)
    produce(inp, [(None, str(i)) for i in range(4)])
    config = job_config(f"kafka.{inp}", out)
    run_job(config)
    assert main(["checkpoint", "reset", "--to", "earliest", str(write_job_file(tmp_path, config))]) == 0
    run_job(config)
    assert len(read_topic(out)) == 8


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("task.comit.ms=5", "task.commit.ms"),
        ("task.commit.ms=soon", "task.commit.ms"),
        ("blobstore.chunk.size=10", "blobstore.chunk.size"),
        ("job.processing.guarantee=exactly-once", "exactly_once"),
        ("systems.kafka.consumer.fetch.bogus.bytes=1", "librdkafka rejects it"),
    ],
)
def test_run_with_bad_config_exits_naming_the_key(job_config, topics, tmp_path, caplog, override, named):
    config = job_config(f"kafka.{topics(1)}", "unused")
    assert main(["run", str(write_job_file(tmp_path, config)), f"--config={override}"]) == 2
    assert named in caplog.text
    assert override.split("=")[0] in caplog.text


def test_reset_of_an_unknown_task_is_named(job_config, topics, tmp_path, caplog):
    config = job_config(f"kafka.{topics(2)}", topics(1))
    JobCoordinator(JobConfig(Config(config))).create_resources()  # as a job's first start would
    assert (
        main(
            [
                "checkpoint",
                "reset",
                "--to",
                "earliest",
                "--task",
                "Partition 9",
                str(write_job_file(tmp_path, config)),
            ]
        )
        == 2
    )
    assert "Partition 9" in caplog.text and "Partition 0, Partition 1" in caplog.text


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("stores.counts.key.serde=nosuchserde", "stores.counts.key.serde=nosuchserde"),
        ("systems.kafka.samza.msg.serde=nosuchserde", "systems.kafka.samza.msg.serde=nosuchserde"),
        ("task.class=samsa_test_tasks:Nope", "task.class"),
    ],
)
def test_job_errors_are_found_before_any_container_starts(
    job_config, topics, tmp_path, caplog, override, named
):
    config = job_config(f"kafka.{topics(1)}", "unused", **{"stores.counts.factory": "inmemory"})
    assert main(["run", str(write_job_file(tmp_path, config)), f"--config={override}"]) == 2
    assert named in caplog.text
    assert "started container" not in caplog.text


def test_an_override_mends_a_bad_value_in_the_file(job_config, topics, produce, read_topic, tmp_path):
    inp, out = topics(1), topics(1)
    produce(inp, [(None, "x")])
    config = job_config(f"kafka.{inp}", out)
    bad = write_job_file(tmp_path, {**config, "task.commit.ms": "soon"})
    assert (
        main(
            [
                "run",
                "--container-id",
                "0",
                "--until-caught-up",
                str(bad),
                "--config=task.commit.ms=1000",
            ]
        )
        == 0
    )
    assert len(read_topic(out)) == 1


def test_show_and_reset_follow_the_configured_checkpoint_versions(
    job_config, topics, produce, tmp_path, capsys
):
    from samsa.checkpoint.checkpoint_id import CheckpointId
    from samsa.checkpoint.model import Checkpoint, CheckpointV2
    from samsa.kafka import KafkaProducer
    from samsa.runtime.coordinator import JobCoordinator, checkpoint_manager

    inp = topics(1)
    produce(inp, [(None, str(i)) for i in range(6)])
    config = job_config(f"kafka.{inp}", topics(1))
    job = JobConfig(Config(config))
    ssp = SystemStreamPartition("kafka", inp, 0)
    markers = {"kafka-changelog": {"counts": "m"}}
    cp_id = CheckpointId.create()
    producer = KafkaProducer(client_config(job, "kafka", "producer"))
    try:
        JobCoordinator(job).create_resources()  # as a job's first start would
        manager = checkpoint_manager(job, producer)
        # V1 and V2 disagree, so the output shows which one was read.
        manager.write_versions(
            "Partition 0", [1, 2], Checkpoint({ssp: 2}), CheckpointV2(cp_id, {ssp: 5}, markers)
        )
        manager.flush()
    finally:
        producer.close()
    job_file = write_job_file(tmp_path, config)
    assert main(["checkpoint", "show", str(job_file)]) == 0
    assert f"kafka.{inp}#0  offset 5  high watermark 6  lag 1" in capsys.readouterr().out
    assert main(["checkpoint", "show", str(job_file), "--config=task.checkpoint.read.versions=1"]) == 0
    assert f"kafka.{inp}#0  offset 2  high watermark 6  lag 4" in capsys.readouterr().out

    # Reset rewrites both records: whichever version the job reads resumes at the target, state kept.
    assert main(["checkpoint", "reset", "--to", "latest", str(job_file)]) == 0
    reader = checkpoint_manager(job)
    assert reader.read_last([2, 1])["Partition 0"] == CheckpointV2(cp_id, {ssp: 6}, markers)
    assert reader.read_last([1])["Partition 0"] == Checkpoint({ssp: 6})


def test_show_and_reset_of_a_job_that_never_ran_say_so_and_create_nothing(
    job_config, topics, kafka_admin, tmp_path, caplog
):
    config = job_config(f"kafka.{topics(1)}", "unused")
    job = JobConfig(Config(config))
    internal = [checkpoint_topic(job.name, job.id), coordinator_topic(job)]
    job_file = str(write_job_file(tmp_path, config))

    assert main(["checkpoint", "show", job_file]) == 2
    assert f"job {job.name} (id 1) has no checkpoints: topic {internal[0]} does not exist" in caplog.text
    assert "check job.name and job.id" in caplog.text and "UNKNOWN_PARTITION" not in caplog.text
    caplog.clear()
    assert main(["checkpoint", "reset", "--to", "earliest", job_file]) == 2
    assert "has no checkpoints" in caplog.text and "nothing to reset" in caplog.text
    assert kafka_admin.partition_counts(internal) == dict.fromkeys(internal), "reset created no topics"
