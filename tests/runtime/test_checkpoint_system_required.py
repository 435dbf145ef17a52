"""`task.checkpoint.system` is required once the inputs span systems: the first input's system, the old
default, moved the checkpoint and coordinator topics with the order of task.inputs (a job started over)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_system
from samsa.runtime.exceptions import ConfigError

TWO_CLUSTERS = {
    "job.name": "twoclusters",
    "task.class": "samsa.runtime.task:StreamTask",
    "systems.east.samza.factory": "kafka",
    "systems.east.bootstrap.servers": "east:9092",
    "systems.west.samza.factory": "kafka",
    "systems.west.bootstrap.servers": "west:9092",
}


def job(**keys: str) -> JobConfig:
    """A job on the two clusters, plus `keys` (`__` for dots)."""
    return JobConfig(Config({**TWO_CLUSTERS, **{k.replace("__", "."): v for k, v in keys.items()}}))


def refused(**keys: str) -> str:
    with pytest.raises(ConfigError) as info:
        job(**keys)
    return str(info.value)


@pytest.mark.parametrize("inputs", ["east.clicks,west.orders", "west.orders,east.clicks"])
def test_inputs_on_two_clusters_without_the_key_are_refused_naming_it_and_the_old_default(
    inputs: str,
) -> None:
    message = refused(task__inputs=inputs)
    first = inputs.partition(".")[0]
    assert message.startswith(
        "task.checkpoint.system is required: task.inputs lists streams of 2 clusters"
    ), message
    assert "east: east.clicks" in message and "west: west.orders" in message
    # An existing job keeps its checkpoints by setting the system they went to so far.
    assert f"now starts on system {first!r}: set task.checkpoint.system={first} to keep its" in message


@pytest.mark.parametrize(
    "keys",
    [
        # Adjunct and broadcast streams come after task.inputs: never the first input, the old default.
        {"stores__table__adstore.input": "west.table", "stores__table__factory": "inmemory"},
        {"task__broadcast.inputs": "west.rules#0"},
        # Two systems of one cluster: the topics stay on it in any order.
        {"task__inputs": "east.clicks,alias.orders,east.more"},
    ],
)
def test_inputs_whose_order_cannot_move_the_topics_need_no_key(keys: dict[str, str]) -> None:
    same_cluster = {
        "systems__alias__samza.factory": "kafka",
        "systems__alias__bootstrap.servers": "east:9092",
    }
    assert checkpoint_system(job(**{"task__inputs": "east.clicks", **same_cluster, **keys})) == "east"


@pytest.mark.parametrize("system", ["east", "west"])
def test_the_key_picks_the_system_whatever_the_order_of_the_inputs(system: str) -> None:
    for inputs in ("east.clicks,west.orders", "west.orders,east.clicks", "west.orders"):
        assert checkpoint_system(job(task__inputs=inputs, task__checkpoint__system=system)) == system


def test_a_single_system_job_needs_no_key() -> None:
    assert checkpoint_system(job(task__inputs="west.orders,west.returns")) == "west"
    # Outputs on another system do not move the checkpoints: only inputs decided the old default.
    assert checkpoint_system(job(task__inputs="west.orders", task__outputs="east.totals")) == "west"


def test_a_checkpoint_system_naming_no_configured_system_is_refused() -> None:
    message = refused(task__inputs="east.clicks,west.orders", task__checkpoint__system="north")
    assert "systems.north.samza.factory is required" in message
    assert "(by task.checkpoint.system=north)" in message


def test_samsa_run_refuses_it_as_a_config_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "job.properties"
    lines = {**TWO_CLUSTERS, "task.inputs": "west.orders,east.clicks"}
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    assert main(["run", str(path)]) == 2
    assert "task.checkpoint.system is required" in caplog.text


def test_a_job_whose_topics_are_on_another_of_its_systems_is_refused_naming_both(tmp_path: Path) -> None:
    """A job that ran on two clusters under the old default (the first input's system) and then dropped
    that input is single-system: no key is required, but its checkpoints are on the other cluster. Its start
    finds them there and is refused instead of starting over from samza.offset.default."""
    from samsa.kafka import KafkaAdmin
    from samsa.kafka.inmemory.registry import forget
    from samsa.runtime.coordinator import JobCoordinator, coordinator_topic

    east, west = (f"inmemory://cpsys-{name}-{uuid.uuid4().hex[:8]}" for name in ("east", "west"))
    base = {
        "job.name": "moved",
        "task.class": "samsa.runtime.task:StreamTask",
        "systems.east.samza.factory": "inmemory",
        "systems.east.bootstrap.servers": east,
        "systems.west.samza.factory": "inmemory",
        "systems.west.bootstrap.servers": west,
        "job.logged.store.base.dir": str(tmp_path),
        "job.non-logged.store.base.dir": str(tmp_path),
    }
    try:
        for url, topic in ((east, "clicks"), (west, "orders")):
            with KafkaAdmin({"bootstrap.servers": url}) as admin:
                admin.create_topic(topic, 1)
        ran = JobConfig(
            Config({**base, "task.inputs": "east.clicks,west.orders", "task.checkpoint.system": "east"})
        )
        JobCoordinator(ran).prepare()  # its topics are on east, as the old default put them
        dropped = JobConfig(Config({**base, "task.inputs": "west.orders"}))  # systems.east still defined
        with pytest.raises(ConfigError) as info:
            JobCoordinator(dropped).prepare()
        message = str(info.value)
        assert f"no coordinator topic {coordinator_topic(dropped)} on system west" in message, message
        assert "system east holds it" in message and "set task.checkpoint.system=east" in message, message
        # Set as the error says, the job finds its topics again.
        JobCoordinator(
            JobConfig(Config({**base, "task.inputs": "west.orders", "task.checkpoint.system": "east"}))
        ).prepare()
    finally:
        forget(east)
        forget(west)
