"""The root of every error Samsa raises."""


class SamsaError(Exception):
    """Base class of all Samsa errors; each package derives its own from it."""
