"""Stored bytes a store's configured serde cannot read (its serde changed while it held data) fail every read
as a config-like error that names the store, the serde setting, the serde and the key, and that a
supervisor does not restart: the stored bytes never change, so a restart meets them again."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.exceptions import InvalidConfigError, SamsaError
from samsa.runtime.exceptions import UserCodeError
from samsa.serde.builtin import JsonSerde, LongSerde, StringSerde
from samsa.serde.exceptions import DeserializationError, SchemaRegistryError
from samsa.stores.cached import CachedStore
from samsa.stores.exceptions import StoreSerdeMismatchError
from samsa.stores.memory import InMemoryStore
from samsa.stores.serialized import SerializedStore


def _counts(key_serde: Any = None, msg_serde: Any = None) -> SerializedStore[Any, Any]:
    """Store `counts` holding what a string/long store wrote, read with the serdes given."""
    engine = InMemoryStore("counts")
    for word, n in (("kings", 3), ("queens", 5)):
        engine.put(word.encode(), struct.pack(">q", n))
    return SerializedStore(engine, key_serde or StringSerde(), msg_serde or JsonSerde())


def _assert_told(error: StoreSerdeMismatchError, part: str, serde: str, where: str) -> None:
    text = str(error)
    assert isinstance(error, InvalidConfigError)
    assert error.store == "counts" and error.part == part and error.serde == serde
    assert f"in store 'counts': {where}" in text, text
    assert f"stores.counts.{part}.serde (the {serde} serde) cannot read" in text, text
    assert f"Was stores.counts.{part}.serde changed" in text, text
    assert f"Set stores.counts.{part}.serde back" in text and "a new name" in text, text
    # Not restarted: the same bytes fail every restart. As process() reports it, too.
    assert unmendable_exit(error) == CONFIG_ERROR_EXIT
    try:
        raise UserCodeError("task Partition 0: process() failed") from error
    except UserCodeError as wrapped:
        assert unmendable_exit(wrapped) == CONFIG_ERROR_EXIT


def test_get_of_a_value_the_new_serde_cannot_read_is_a_config_error_naming_store_serde_and_key() -> None:
    store = _counts()
    with pytest.raises(StoreSerdeMismatchError) as failed:
        store.get("kings")
    _assert_told(failed.value, "msg", "json", "get('kings')")
    assert "json serde cannot deserialize" in str(failed.value)
    assert store.get("absent") is None  # a miss never reaches the serde


def test_get_through_the_object_cache_is_told_the_same() -> None:
    store = CachedStore(_counts(), 8, 4)
    with pytest.raises(StoreSerdeMismatchError) as failed:
        store.get("queens")
    _assert_told(failed.value, "msg", "json", "get('queens')")


def test_get_all_names_the_key_whose_value_cannot_be_read() -> None:
    store = _counts()
    with pytest.raises(StoreSerdeMismatchError) as failed:
        store.get_all(["queens", "absent"])
    _assert_told(failed.value, "msg", "json", "get_all(...) at 'queens'")


@pytest.mark.parametrize("read", ["all", "range", "snapshot"])
def test_iterating_values_the_serde_cannot_read_names_the_key(read: str) -> None:
    store = _counts()
    entries = {
        "all": lambda: store.all(),
        "range": lambda: store.range("a", "z"),
        "snapshot": lambda: store.snapshot("a", "z").iterator(),
    }[read]()
    with pytest.raises(StoreSerdeMismatchError) as failed:
        list(entries)
    _assert_told(failed.value, "msg", "json", "iterating at key 'kings'")


def test_iterating_keys_the_key_serde_cannot_read_blames_the_key_serde() -> None:
    store = _counts(key_serde=LongSerde(), msg_serde=LongSerde())  # string keys read as longs
    with pytest.raises(StoreSerdeMismatchError) as failed:
        list(store.all())
    _assert_told(failed.value, "key", "long", "iterating at serialized key b'kings'")


def test_a_registry_outage_while_reading_stays_what_it_is_so_a_restart_may_mend_it() -> None:
    outage = SchemaRegistryError("schema registry http://registry:8081 unreachable")

    class RegistryDown:
        name = "avro"

        def to_bytes(self, obj: Any) -> bytes:
            return b""

        def from_bytes(self, data: bytes) -> Any:
            raise outage

    with pytest.raises(SchemaRegistryError) as failed:
        _counts(msg_serde=RegistryDown()).get("kings")
    assert failed.value is outage and unmendable_exit(outage) is None
    assert "in store 'counts': get('kings')" in failed.value.__notes__


def test_a_failing_store_below_is_not_taken_for_a_serde_mismatch() -> None:
    class Broken(InMemoryStore):
        def get(self, key: bytes) -> bytes | None:
            raise OSError("read failed")

    store: SerializedStore[str, int] = SerializedStore(Broken("counts"), StringSerde(), LongSerde())
    with pytest.raises(OSError) as failed:
        store.get("kings")
    assert not isinstance(failed.value, StoreSerdeMismatchError)


def test_a_task_catching_the_serdes_deserialization_error_around_a_read_still_catches_it() -> None:
    # Before the mismatch error, a bad stored value raised the serde's DeserializationError; a task that
    # tolerated those (except DeserializationError around store.get) must not now fail the job.
    store = _counts()
    try:
        store.get("kings")
    except DeserializationError as e:
        assert isinstance(e, StoreSerdeMismatchError) and isinstance(e, SamsaError)
        assert e.serde == "json" and "cannot deserialize" in e.reason
    else:
        raise AssertionError("get('kings') read a long as json")
