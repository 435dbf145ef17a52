"""User key/value extractors that the adjunct tests load by their factory path."""

from collections.abc import Iterable
from typing import Any

from samsa.runtime.task import IncomingMessageEnvelope


class UpperNameExtractor:
    """Projects a customer record to its upper-cased name, keyed by the record's id."""

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[tuple[Any, Any]]:
        yield envelope.value["id"], envelope.value["name"].upper()


def make_upper_name_extractor() -> UpperNameExtractor:
    return UpperNameExtractor()


ready_extractor = UpperNameExtractor()

not_an_extractor = 42


class NoExtractMethod:
    pass


class NeedsArguments:
    """Takes two arguments, where an extractor factory is given none or its options."""

    def __init__(self, store: str, table: str) -> None:
        self.store, self.table = store, table

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[tuple[Any, Any]]:
        return ()


class NameOrRecordExtractor:
    """Stores each customer's name (a str), but the whole record (a dict) of the one whose name is
    `odd`: a string store takes every record but that one."""

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[tuple[Any, Any]]:
        value = envelope.value
        yield envelope.key, value if value["name"] == "odd" else value["name"]


class UpperNameRecordExtractor:
    """Stores each customer record as `{"name": <its name upper-cased>}`, under the message's key."""

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[tuple[Any, Any]]:
        yield envelope.key, {"name": envelope.value["name"].upper()}


class FieldExtractor:
    """Stores the record's field named by its own key `field` (stores.<s>.adstore.key.value.extractor.field),
    keyed by the record's id."""

    def __init__(self, options: dict[str, str]) -> None:
        self.field = options["field"]

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[tuple[Any, Any]]:
        yield envelope.value["id"], envelope.value[self.field]


def make_field_extractor(options: dict[str, str]) -> FieldExtractor:
    return FieldExtractor(options)


class DefaultFieldExtractor:
    """Stores the record's field `field` (by default `name`), keyed by the record's id: an extractor whose
    constructor has an optional argument, written before extractors were given their options."""

    def __init__(self, field: str = "name") -> None:
        self.field = field

    def extract(self, envelope: IncomingMessageEnvelope) -> Iterable[tuple[Any, Any]]:
        yield envelope.value["id"], envelope.value[self.field]
