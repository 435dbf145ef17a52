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
    def __init__(self, store: str) -> None:
        self.store = store

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
