"""Errors raised by the serde package."""

from samsa.exceptions import InvalidConfigError, SamsaError


class SerdeError(SamsaError):
    """Base class of serde errors."""


class SerdeConfigError(SerdeError, InvalidConfigError):
    """A `serializers.registry.*` key is missing, unknown or malformed, or a serde name is unknown."""


class ReaderSchemaError(SerdeConfigError):
    """The configured reader schema cannot read data of a writer schema (a field without a default, a
    type that does not promote, a missing enum symbol): the schemas are at fault, not the message."""


class SerializationError(SerdeError):
    """An object could not be turned into bytes.

    `serde` names the serde and `reason` says briefly what was wrong, so the caller can re-raise with the
    topic/partition/offset; the original exception stays chained as `__cause__`.
    """

    def __init__(self, serde: str, reason: str) -> None:
        super().__init__(f"{serde} serde cannot serialize: {reason}")
        self.serde = serde
        self.reason = reason


class DeserializationError(SerdeError):
    """Bytes could not be turned into an object; attributes as in `SerializationError`."""

    def __init__(self, serde: str, reason: str) -> None:
        super().__init__(f"{serde} serde cannot deserialize: {reason}")
        self.serde = serde
        self.reason = reason


class SchemaRegistryError(SerdeError):
    """The schema registry failed or refused a request.

    Kept apart from `DeserializationError`: a registry outage is an infrastructure fault, not a bad
    message, so a "skip bad messages" policy must not swallow it. `status` is the HTTP status (None when
    the registry could not be reached) and `error_code` the registry's own code (e.g. 40403), if any.
    """

    def __init__(self, message: str, status: int | None = None, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code

    @property
    def not_found(self) -> bool:
        """True when the registry answered that the subject, version or schema id does not exist."""
        return self.status == 404
