"""Errors of the checkpoint package."""

from samsa.exceptions import SamsaError


class CheckpointError(SamsaError):
    """A checkpoint cannot be read, written or reset."""


class CheckpointFencedError(CheckpointError):
    """A newer start of the same container exists: this instance (a zombie) may not commit, and stops."""
