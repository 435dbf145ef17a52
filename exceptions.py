"""The root of every error Samsa raises."""


class SamsaError(Exception):
    """Base class of all Samsa errors; each package derives its own from it."""


class InvalidConfigError(SamsaError):
    """Marks each package's configuration error: the job cannot run as configured, and a restart meets the
    same error until the config is fixed (so supervisors do not restart a container that raised it)."""
