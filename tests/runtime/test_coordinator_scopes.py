"""coordinator.commit(scope) / shutdown(scope) take a RequestScope or its name; any other value is refused,
rather than silently acting as CURRENT_TASK."""

from __future__ import annotations

from typing import Any

import pytest

from samsa import RequestScope, StreamTask
from samsa.runtime.exceptions import UserCodeError
from samsa.runtime.task_instance import TaskCoordinatorImpl
from samsa.testing import TestRunner, TestRunnerError


@pytest.mark.parametrize("request_name", ["commit", "shutdown"])
def test_a_scope_given_by_its_name_is_that_scope(request_name: str) -> None:
    coordinator = TaskCoordinatorImpl()
    getattr(coordinator, request_name)("ALL_TASKS_IN_CONTAINER")
    assert getattr(coordinator, f"{request_name}_scope") is RequestScope.ALL_TASKS_IN_CONTAINER
    getattr(coordinator, request_name)("CURRENT_TASK")  # the wider scope stays
    assert getattr(coordinator, f"{request_name}_scope") is RequestScope.ALL_TASKS_IN_CONTAINER
    other = TaskCoordinatorImpl()
    getattr(other, request_name)(RequestScope.CURRENT_TASK)
    assert getattr(other, f"{request_name}_scope") is RequestScope.CURRENT_TASK and other.requested


@pytest.mark.parametrize("request_name", ["commit", "shutdown"])
@pytest.mark.parametrize("scope", [None, "all_tasks_in_container", "ALL", 1, True])
def test_any_other_scope_is_refused_listing_the_valid_ones(request_name: str, scope: Any) -> None:
    coordinator = TaskCoordinatorImpl()
    with pytest.raises(TypeError) as refused:
        getattr(coordinator, request_name)(scope)
    assert str(refused.value) == (
        f"coordinator.{request_name}(scope): scope must be one of RequestScope.CURRENT_TASK (or "
        "'CURRENT_TASK'), RequestScope.ALL_TASKS_IN_CONTAINER (or 'ALL_TASKS_IN_CONTAINER'), "
        f"got {scope!r}"
    )
    assert (
        not coordinator.requested and coordinator.commit_scope is None and coordinator.shutdown_scope is None
    )


class StopsAllByName(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.partition == 0:
            coordinator.shutdown("ALL_TASKS_IN_CONTAINER")


def test_shutdown_of_all_tasks_by_name_from_one_task_stops_the_container() -> None:
    with TestRunner.of(StopsAllByName) as runner:
        runner.add_input("in", {0: ["a"], 1: ["b"]}, partitions=2).run(timeout=10)
        with pytest.raises(TestRunnerError, match="shut down"):
            runner.add_input("in", {1: ["c"]}).run(timeout=10)


class ShutsDownWithNone(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        coordinator.shutdown(None)


def test_a_bad_scope_fails_the_task_at_the_call() -> None:
    with TestRunner.of(ShutsDownWithNone) as runner, pytest.raises(UserCodeError) as failed:
        runner.add_input("in", ["a"]).run(timeout=10)
    assert 'process() failed on in#0@0: TypeError("coordinator.shutdown(scope): scope must be one of' in str(
        failed.value
    )
