"""A versioned store is fed by one partition per task: a broadcast one over several partitions is refused at
the start with a configuration error naming the store and its stream."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from job_fixtures import job_config, run_in_process
from versioned_datasets import produce_dataset, versioned_job

from samsa.exceptions import InvalidConfigError

__all__ = ["job_config"]


def test_a_broadcast_versioned_store_over_two_partitions_is_a_config_error(
    job_config: Any, topics: Any, kafka_bootstrap: str
) -> None:
    orders, models, out = topics(1), topics(2), topics(1)
    config = versioned_job(job_config, orders, models, out)
    config["task.broadcast.inputs"] = f"kafka.{models}#[0-1]"
    produce_dataset(kafka_bootstrap, models, "d1", range(3))
    # Before: a ContainerError (a task failure, restarted by a supervisor) naming neither key nor stream.
    with pytest.raises(InvalidConfigError) as caught:
        run_in_process(config)
    message = str(caught.value)
    assert message.startswith("stores.customers.adstore.versioned: store 'customers'")
    assert f"its stream kafka.{models} is broadcast (task.broadcast.inputs) with partitions 0, 1" in message
    assert "stores.customers.adstore.versioned=false" in message
