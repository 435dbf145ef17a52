"""Errors of the checkpoint package."""

from samsa.exceptions import SamsaError


class CheckpointError(SamsaError):
    """A checkpoint cannot be read, written or reset."""
