"""Errors raised by the deployments: supervising containers locally or on Spark, the control channel."""

from samsa.exceptions import SamsaError


class DeployError(SamsaError):
    """Base class of the deploy package's errors."""


class SparkError(DeployError):
    """Spark could not start, or a Spark job failed."""


class SparkMissingError(SparkError):
    """The `spark` extra (pyspark) is not installed."""


class SparkJvmLostError(SparkError):
    """Spark's JVM (the driver's gateway) exited while the job ran: every container went with it."""


class ControlError(DeployError):
    """The driver's control channel refused a container, or cannot be reached."""


class ControlProtocolError(ControlError):
    """A control-channel peer sent a malformed, oversized or unexpected message."""


class BootstrapError(DeployError):
    """A state bootstrap cannot run (job running, store or columns wrong) or met a bad row."""


class ForkServerError(DeployError):
    """The local supervisor's fork server cannot start a container (fresh interpreters start instead)."""
