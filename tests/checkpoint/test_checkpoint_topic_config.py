"""The checkpoint topic Samsa creates takes Samza's `task.checkpoint.segment.bytes` (default 25 MiB, so that
compaction reaches what every start reads) and `task.checkpoint.replication.factor`."""

from __future__ import annotations

import pytest

from samsa.checkpoint.kafka_manager import checkpoint_topic
from samsa.exceptions import SamsaError
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator


@pytest.mark.parametrize(("given", "expected"), [(None, "26214400"), ("1048576", "1048576")])
def test_the_checkpoint_topic_gets_its_segment_size(job_config, topics, kafka_admin, given, expected) -> None:
    extra = {} if given is None else {"task.checkpoint.segment.bytes": given}
    job = JobConfig(Config(job_config(f"kafka.{topics(1)}", topics(1), **extra)))
    JobCoordinator(job).prepare()
    config = kafka_admin.topic_config(checkpoint_topic(job.name, job.id))
    assert config.get("segment.bytes") == expected
    assert config.get("cleanup.policy") == "compact"


def test_a_replication_factor_the_broker_cannot_meet_is_refused_naming_the_topic(job_config, topics) -> None:
    extra = {"task.checkpoint.replication.factor": "3"}  # the test broker is one broker
    job = JobConfig(Config(job_config(f"kafka.{topics(1)}", topics(1), **extra)))
    with pytest.raises(SamsaError, match=checkpoint_topic(job.name, job.id)) as refused:
        JobCoordinator(job).prepare()
    assert "replication factor of 3" in str(refused.value)
