"""`samsa checkpoint reset --to`: a number too large for a time is refused as other bad text is, and a time
later than every input's newest record (a mistyped year) resets as `latest` does, with a warning."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from job_files import checkpointed_offsets, write_job_file

from samsa.checkpoint.exceptions import CheckpointError
from samsa.checkpoint.tool import parse_reset_target
from samsa.cli import main
from samsa.streams import SystemStreamPartition

PAST_EVERY_RECORD = "later than the newest record of every input partition"


@pytest.mark.parametrize(
    "text", ["99999999999999999999", "253402300800000", "1960-01-01T00:00:00Z", "0001-01-01", "1e12"]
)
def test_a_target_outside_1970_to_9999_is_refused_as_other_bad_text_is(text: str) -> None:
    with pytest.raises(CheckpointError) as info:
        parse_reset_target(text)
    assert str(info.value).startswith(
        f"--to {text!r}: write earliest, latest, epoch milliseconds or an ISO time like 2026-11-23T10:00:00Z"
    )


def test_the_last_millisecond_of_9999_is_a_target() -> None:
    last = int(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC).timestamp() * 1000)
    assert parse_reset_target(str(last)) == last == parse_reset_target("9999-12-31T23:59:59.999Z")


def test_reset_to_a_huge_number_is_an_error_message_not_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "job.name": "huge",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.huge-in",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "127.0.0.1:1",  # never reached: the target is refused first
        "job.non-logged.store.base.dir": str(tmp_path / "state"),
    }
    job_file = write_job_file(tmp_path, config)
    assert main(["checkpoint", "reset", "--to", "99999999999999999999", str(job_file)]) == 2
    assert "--to '99999999999999999999': write earliest, latest, epoch milliseconds" in caplog.text
    assert "Traceback" not in caplog.text and "OverflowError" not in caplog.text


def test_reset_to_a_time_past_every_record_warns_and_one_within_does_not(
    job_config, topics, produce, run_job, tmp_path, caplog
):
    inp = topics(2)
    produce(inp, [(None, str(i)) for i in range(3)], partition=0)
    produce(inp, [(None, str(i)) for i in range(2)], partition=1)
    config = job_config(f"kafka.{inp}", topics(1))
    run_job(config)
    job_file = write_job_file(tmp_path, config)
    assert main(["checkpoint", "reset", "--to", "earliest", str(job_file)]) == 0

    assert main(["checkpoint", "reset", "--to", "2099-01-01T00:00:00Z", str(job_file)]) == 0
    assert checkpointed_offsets(config) == {
        "Partition 0": {SystemStreamPartition("kafka", inp, 0): 3},
        "Partition 1": {SystemStreamPartition("kafka", inp, 1): 2},
    }
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w for w in warnings if PAST_EVERY_RECORD in w] == [
        f"--to 2099-01-01T00:00:00Z is {PAST_EVERY_RECORD} (and it is in the future): every partition was "
        "reset to its end, as --to latest does (a mistyped year?); reset again with an earlier time if that "
        "was not meant"
    ]

    caplog.clear()
    an_hour_ago = str(int(time.time() * 1000) - 3_600_000)  # before every record: no warning
    assert main(["checkpoint", "reset", "--to", an_hour_ago, str(job_file)]) == 0
    assert PAST_EVERY_RECORD not in caplog.text
    assert set(checkpointed_offsets(config)["Partition 0"].values()) == {0}


STATE_KEPT = "the reset moved the input offsets only: store(s)"


def test_reset_of_a_job_with_backed_up_stores_warns_they_keep_their_state(
    job_config, topics, produce, run_job, kafka_admin, tmp_path, caplog
):
    # A reset rewinds the inputs, never the state: a count would count the inputs read again twice.
    inp = topics(1)
    produce(inp, [(None, "a")], partition=0)
    plain = job_config(f"kafka.{inp}", topics(1))
    run_job(plain)
    assert main(["checkpoint", "reset", "--to", "earliest", str(write_job_file(tmp_path, plain))]) == 0
    assert STATE_KEPT not in caplog.text  # no store: nothing to say

    stored = job_config(
        f"kafka.{inp}",
        topics(1),
        **{
            "stores.counts.factory": "rocksdb",
            "stores.counts.changelog": f"kafka.{inp}-changelog",  # made compacted by the job
            "stores.scratch.factory": "rocksdb",
        },
    )
    try:
        run_job(stored)
        caplog.clear()
        assert main(["checkpoint", "reset", "--to", "earliest", str(write_job_file(tmp_path, stored))]) == 0
    finally:
        kafka_admin.delete_topics([f"{inp}-changelog"])
    warnings = [r.getMessage() for r in caplog.records if STATE_KEPT in r.getMessage()]
    assert len(warnings) == 1 and f"{STATE_KEPT} counts keep their state" in warnings[0], warnings
    assert "start the state over" in warnings[0] and "scratch" not in warnings[0]
