"""Which partition-count changes move keys away from a changelogged store's state, and which stores keep
state in a changelog: the pure parts of the start's check (no broker)."""

from __future__ import annotations

from background import MINIMAL_JOB

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.exceptions import StateKeysMovedError
from samsa.runtime.job_model import build_job_model
from samsa.runtime.state_placement import check_state_placement, grouped_changes, logged_state
from samsa.streams import SystemStream, SystemStreamPartition

A = SystemStream("kafka", "a")
B = SystemStream("kafka", "b")
C = SystemStream("kafka", "c")


def _broadcast(ss: SystemStream, n: int) -> list[SystemStreamPartition]:
    return [SystemStreamPartition(*ss, p) for p in range(n)]


def test_a_grouped_stream_with_another_count_is_a_change_even_with_the_same_task_count() -> None:
    stored = build_job_model({A: 4, B: 2}, 1)
    model = build_job_model({A: 4, B: 4}, 1)
    assert len(stored.tasks) == len(model.tasks) == 4
    assert grouped_changes(stored, model) == {B: (2, 4)}
    assert grouped_changes(stored, stored) == {}


def test_a_stream_new_to_the_inputs_or_removed_from_them_is_no_change() -> None:
    stored = build_job_model({A: 4, B: 2}, 1)
    assert grouped_changes(stored, build_job_model({A: 4, C: 8}, 1)) == {}
    assert grouped_changes(stored, build_job_model({A: 4, B: 2, C: 8}, 1)) == {}
    assert grouped_changes(stored, build_job_model({A: 4}, 1)) == {}


def test_a_broadcast_stream_is_no_change() -> None:
    # Every task reads a broadcast partition: none of its keys belongs to one task.
    stored = build_job_model({A: 4, C: 2}, 1, _broadcast(C, 2))
    grown = build_job_model({A: 4, C: 3}, 1, _broadcast(C, 3))
    assert grouped_changes(stored, grown, _broadcast(C, 3)) == {}
    # Partly broadcast before (2 of 3 partitions listed): grouped in one model only, no key of it moved.
    assert grouped_changes(stored, build_job_model({A: 4, C: 3}, 1, _broadcast(C, 2)), _broadcast(C, 2)) == {}


def test_stores_with_a_changelog_backup_keep_state_and_blob_backed_ones_are_named() -> None:
    config = {
        **MINIMAL_JOB,
        "stores.logged.factory": "rocksdb",
        "stores.logged.changelog": "kafka.logged-changelog",
        "stores.both.factory": "rocksdb",
        "stores.both.changelog": "kafka.both-changelog",
        "stores.both.backup.factories": "changelog,blobstore",
        "stores.blob.factory": "rocksdb",
        "stores.blob.backup.factories": "blobstore",
        "stores.scratch.factory": "inmemory",
    }
    logs, blob_backed = logged_state(JobConfig(Config(config)))
    assert logs == {
        "both": SystemStream("kafka", "both-changelog"),
        "logged": SystemStream("kafka", "logged-changelog"),
    }
    assert blob_backed == ["both"]


def test_no_change_asks_no_broker() -> None:
    # A broker nobody listens on: the check returns before any client is made.
    config = {
        **MINIMAL_JOB,
        "systems.kafka.bootstrap.servers": "127.0.0.1:1",
        "stores.logged.factory": "rocksdb",
        "stores.logged.changelog": "kafka.logged-changelog",
    }
    model = build_job_model({A: 4, B: 2}, 1)
    check_state_placement(JobConfig(Config(config)), model, build_job_model({A: 4, B: 2, C: 3}, 1))


def test_the_refusal_is_a_config_error_naming_job_store_changelog_counts_and_the_fix() -> None:
    error = StateKeysMovedError(
        "clicks-1",
        {"kafka.b": (2, 4)},
        {"counts": "kafka.counts-changelog"},
        [],
        "./state/clicks-1/*/counts and counts-*",
    )
    assert unmendable_exit(error) == CONFIG_ERROR_EXIT  # the supervisors end the job: no restart
    message = str(error)
    assert message.startswith("job clicks-1: ")
    assert "kafka.b: 2 -> 4 partitions" in message
    assert "store 'counts' (changelog kafka.counts-changelog)" in message
    assert "delete changelog topic(s) counts-changelog" in message
    assert "./state/clicks-1/*/counts and counts-*" in message
    assert "a new topic with the old count" in message and "new job.id" not in message
    both = str(StateKeysMovedError("j-1", {"kafka.b": (2, 4)}, {"s": "kafka.s-log"}, ["s"], "d"))
    assert "store(s) 's' are backed up to the blob store too" in both and "new job.id" in both
