"""The TestRunner as `samsa run` with several containers: a task's coordinator.shutdown() ends its own
container, the others run on; and the job name it makes up draws no job.name warning."""

from __future__ import annotations

import logging

import pytest

from samsa import OutgoingMessage, StreamTask
from samsa.runtime.task import RequestScope
from samsa.testing import TestRunner, TestRunnerError

TWO_CONTAINERS = {"job.container.count": 2, "systems.kafka.samza.msg.serde": "string"}
CLOSED: list[str] = []


class StopOnStop(StreamTask):
    """Logs each message to `log` as (task, value), counts it in store `seen`; "stop" shuts its container."""

    def init(self, context):
        self.name = context.task_name
        self.seen = context.store("seen")

    def process(self, envelope, collector, coordinator):
        self.seen.put(envelope.value, (self.seen.get(envelope.value) or 0) + 1)
        collector.send(OutgoingMessage("kafka", "log", key=self.name, value=envelope.value))
        if envelope.value == "stop":
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    def close(self):
        CLOSED.append(self.name)


def test_a_shutdown_ends_its_own_container_and_the_other_goes_on_in_later_runs(tmp_path):
    CLOSED.clear()
    with TestRunner.of(StopOnStop, state_dir=tmp_path) as runner:
        runner.with_config(TWO_CONTAINERS).add_store("seen").add_output("log")
        result = runner.add_input("in", {0: ["stop"], 1: ["x"]}, partitions=2).run()
        assert CLOSED == ["Partition 0"]  # container 0 ended (close(), a final commit); container 1 runs
        assert sorted(result.output("log")) == ["stop", "x"]
        # Container 1 processes what a later run sends; partition 0's message waits for a restart.
        result = runner.add_input("in", {0: ["after"], 1: ["late"]}).run()
        assert sorted(result.output("log")) == ["late", "stop", "x"]
        # The ended container's store reads from its changelog, the running one's live.
        assert result.store_by_task("seen") == {
            "Partition 0": {"stop": 1},
            "Partition 1": {"x": 1, "late": 1},
        }
        # Once container 1 shuts down too, the job is over until a restart.
        runner.add_input("in", {1: ["stop"]}).run()
        assert CLOSED == ["Partition 0", "Partition 1"]
        with pytest.raises(TestRunnerError, match=r"shut down.*restart\(\)"):
            runner.add_input("in", {1: ["later"]}).run()
        # A restart starts every container again: partition 0 resumes at its checkpoint.
        assert sorted(runner.restart().run().output("log")) == ["after", "late", "later", "stop", "stop", "x"]


def test_a_made_up_job_name_draws_no_warning_but_a_test_set_one_with_underscore_does(tmp_path, caplog):
    def make():
        class Echo_Task(StreamTask):  # a name with '_' too
            def process(self, envelope, collector, coordinator):
                pass

        return Echo_Task

    caplog.set_level(logging.WARNING)
    for n in range(2):  # the second class of one name is registered as `Echo_Task_<n>`
        with TestRunner.of(make(), state_dir=tmp_path / str(n)) as runner:
            runner.add_input("in", ["a"]).run()
    assert "contains '_'" not in caplog.text
    with TestRunner.of(make(), state_dir=tmp_path / "named") as runner:
        runner.with_config({"job.name": "echo_job"}).add_input("in", ["a"]).run()
    assert "job.name='echo_job' contains '_'" in caplog.text
