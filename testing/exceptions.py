"""Errors of the testing kit: a test job that cannot be set up or does not end."""

from samsa.exceptions import SamsaError


class TestingError(SamsaError):
    """Base class of the testing package's errors."""

    __test__ = False  # not a pytest test class


class TestRunnerError(TestingError):
    """The test's job could not be set up or did not finish in time."""


class SchedulerError(TestingError):
    """The scheduled run did not end: a container keeps failing, or the step budget ran out."""
