"""A None key (a key-less input message's) is refused by every store call, on both engines and whatever the
key serde, with the store's error; before, some engines stored it and others failed deep inside."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from samsa import IncomingMessageEnvelope, MessageCollector, StreamTask, TaskContext, TaskCoordinator
from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde
from samsa.serde.exceptions import SerializationError
from samsa.stores.api import KeyValueStore
from samsa.stores.cached import CachedStore
from samsa.stores.exceptions import NoneKeyError, StoreError
from samsa.stores.serialized import SerializedStore
from samsa.testing import TestRunner

KEYS: dict[str, tuple[Any, Any]] = {  # serde: (the serde, a key it takes)
    "string": (StringSerde(), "k"),
    "json": (JsonSerde(), "k"),
    "integer": (IntegerSerde(), 1),
    "long": (LongSerde(), 1),
    "bytes": (BytesSerde(), b"k"),
}
# id: (the call the error names, the call on (store, a key its serde takes))
CALLS: dict[str, tuple[str, Callable[[KeyValueStore[Any, Any], Any], object]]] = {
    "get": ("get(None)", lambda s, k: s.get(None)),
    "put": ("put(None, ...)", lambda s, k: s.put(None, {"v": 1})),
    "put-none": ("put(None, ...)", lambda s, k: s.put(None, None)),  # a delete by put
    "delete": ("delete(None)", lambda s, k: s.delete(None)),
    "get_all": ("", lambda s, k: s.get_all([k, None])),
    "put_all": ("put_all(...)", lambda s, k: s.put_all([(k, {"v": 1}), (None, {"v": 1})])),
    "delete_all": ("delete_all(...)", lambda s, k: s.delete_all([k, None])),
    "range-from": ("range(None, ", lambda s, k: list(s.range(None, k))),
    "range-to": ("range(", lambda s, k: list(s.range(k, None))),
    "snapshot": ("snapshot(None, ", lambda s, k: s.snapshot(None, k)),
}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache"])
@pytest.mark.parametrize("key_serde", list(KEYS))
def test_a_none_key_is_refused_naming_the_store(
    engine: KeyValueStore[bytes, bytes], key_serde: str, cache: bool, call: str
) -> None:
    serde, key = KEYS[key_serde]
    store: KeyValueStore[Any, Any] = SerializedStore(engine, serde, JsonSerde())
    if cache:
        store = CachedStore(store, 100, 10)
    store.put(key, {"v": 0})
    store.flush()
    with pytest.raises(NoneKeyError) as info:
        CALLS[call][1](store, key)
    message = str(info.value)
    # The object cache asks the serde layer for the key's bytes first: that error names no call.
    named = (
        ""
        if cache and call in ("get", "put", "put-none", "delete", "put_all", "delete_all")
        else CALLS[call][0]
    )
    assert message.startswith(f"in store 'test': {named}".rstrip())
    assert "the key is None (a key-less input message's key?); a store needs a key" in message
    assert isinstance(info.value, StoreError) and isinstance(info.value, SerializationError)
    assert info.value.serde == key_serde
    store.flush()
    if not (cache and call in ("put_all", "delete_all")):  # the cache takes a batch entry by entry
        assert list(engine.all()) == [(serde.to_bytes(key), b'{"v":0}')], "nothing of the call was written"


class _StoreByKey(StreamTask):
    def init(self, context: TaskContext) -> None:
        self.store: Any = context.store("s")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        self.store.put(envelope.key, envelope.value)


@pytest.mark.parametrize("factory", ["rocksdb", "inmemory"])
def test_a_task_putting_a_key_less_message_fails_naming_the_store_and_the_message(factory: str) -> None:
    config = {"stores.s.factory": factory, "stores.s.key.serde": "json", "stores.s.msg.serde": "json"}
    runner = (
        TestRunner.of(_StoreByKey).with_config(config).add_input("in", [("k", {"a": 1}), (None, {"a": 2})])
    )
    with pytest.raises(Exception) as info:
        runner.run(timeout=20)
    text = "".join(f"{e}\n{getattr(e, '__notes__', '')}" for e in _chain(info.value))
    assert "process() failed on in#0@1" in text  # the key-less message
    assert "in store 's': the key is None (a key-less input message's key?); a store needs a key" in text


def _chain(error: BaseException | None) -> list[BaseException]:
    found = []
    while error is not None and error not in found:
        found.append(error)
        error = error.__cause__ or error.__context__
    return found
