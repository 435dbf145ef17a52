"""Testing jobs without a broker: the TestRunner, the deterministic scheduler, the pytest plugin."""

from samsa.testing.exceptions import SchedulerError, TestingError, TestRunnerError
from samsa.testing.runner import ManualClock, Message, TestResult, TestRunner

__all__ = [
    "ManualClock",
    "Message",
    "SchedulerError",
    "TestResult",
    "TestRunner",
    "TestRunnerError",
    "TestingError",
]
