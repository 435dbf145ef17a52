"""What a task writes to its stores in close() is in the final commit, so the next start keeps it (as Kafka
Streams commits after closing its processors); a close() that fails fails the stop without a commit."""

from __future__ import annotations

import close_write_tasks
import pytest
import systems_fixtures

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.exceptions import UserCodeError

# Every test here runs on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin


def _run(config: dict[str, str]) -> None:
    job = JobConfig(Config(config))
    for model in JobCoordinator(job).prepare().containers:
        Container(job, model, until_caught_up=True).run()


def _config(job_config, topics, task: str) -> dict[str, str]:
    words, out = topics(1), topics(1)
    return job_config(
        f"kafka.{words}",
        out,
        task=f"close_write_tasks:{task}",
        **{
            "stores.totals.factory": "rocksdb",
            "stores.totals.key.serde": "string",
            "stores.totals.msg.serde": "long",
            "stores.totals.changelog": f"kafka.{words}-changelog",
        },
    )


def test_what_close_writes_to_a_store_survives_the_next_start(job_config, topics, produce, kafka_admin):
    close_write_tasks.SEEN_AT_INIT.clear()
    config = _config(job_config, topics, "CloseWriter")
    words = config["task.inputs"].removeprefix("kafka.")
    try:
        produce(words, [("k", str(i)) for i in range(5)])  # 0+1+2+3+4
        _run(config)
        produce(words, [("k", "10")])
        _run(config)
        _run(config)  # nothing new: the total stays
        # Written after the final commit, the total was undone at the next start: [0, 0, 10].
        assert close_write_tasks.SEEN_AT_INIT == [0, 10, 20]
    finally:
        kafka_admin.delete_topics([f"{words}-changelog"])


def test_a_failing_close_fails_the_stop_without_a_commit(job_config, topics, produce, kafka_admin):
    close_write_tasks.SEEN_AT_INIT.clear()
    config = _config(job_config, topics, "FailingClose")
    words = config["task.inputs"].removeprefix("kafka.")
    try:
        produce(words, [("k", "3")])
        with pytest.raises(UserCodeError, match=r"close\(\) failed: .*close failed on purpose"):
            _run(config)
        # No final commit: the next start resumes from the start-up commit and processes the message again.
        with pytest.raises(UserCodeError):
            _run(config)
        assert close_write_tasks.SEEN_AT_INIT == [0, 0]
    finally:
        kafka_admin.delete_topics([f"{words}-changelog"])
