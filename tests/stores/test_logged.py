"""The logged layer: every write reaches the engine and the changelog partition; reads stay local."""

from __future__ import annotations

import pytest

from samsa.serde.builtin import LongSerde, StringSerde
from samsa.stores.api import KeyValueStore
from samsa.stores.cached import CachedStore
from samsa.stores.exceptions import StoreClosedError
from samsa.stores.logged import LoggedStore
from samsa.stores.serialized import SerializedStore

Sent = tuple[str, bytes | None, bytes | None, int | None]


class FakeSend:
    """Records `KafkaProducer.send` calls."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []

    def __call__(
        self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None
    ) -> None:
        self.sent.append((topic, value, key, partition))


@pytest.fixture
def send() -> FakeSend:
    return FakeSend()


def test_put_writes_engine_and_changelog(engine: KeyValueStore[bytes, bytes], send: FakeSend) -> None:
    store = LoggedStore(engine, send, "cl", 3)
    store.put(b"a", b"1")
    assert engine.get(b"a") == b"1"
    assert store.get(b"a") == b"1"
    assert send.sent == [("cl", b"1", b"a", 3)]


def test_delete_and_put_none_send_tombstones(engine: KeyValueStore[bytes, bytes], send: FakeSend) -> None:
    store = LoggedStore(engine, send, "cl", 0)
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    store.delete(b"a")
    store.put(b"b", None)
    assert engine.get(b"a") is None and engine.get(b"b") is None
    assert send.sent[2:] == [("cl", None, b"a", 0), ("cl", None, b"b", 0)]


def test_put_all_applies_batch_then_sends_each(engine: KeyValueStore[bytes, bytes], send: FakeSend) -> None:
    store = LoggedStore(engine, send, "cl", 1)
    store.put_all(iter([(b"a", b"1"), (b"b", None), (b"c", b"3")]))  # a one-shot iterator is fine
    assert dict(engine.all()) == {b"a": b"1", b"c": b"3"}
    assert send.sent == [("cl", b"1", b"a", 1), ("cl", None, b"b", 1), ("cl", b"3", b"c", 1)]


def test_reads_do_not_send(engine: KeyValueStore[bytes, bytes], send: FakeSend) -> None:
    engine.put_all([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    store = LoggedStore(engine, send, "cl", 0)
    assert store.get_all([b"a", b"z"]) == {b"a": b"1"}
    assert list(store.range(b"b", b"d")) == [(b"b", b"2"), (b"c", b"3")]
    assert [k for k, _ in store.all()] == [b"a", b"b", b"c"]
    store.flush()
    assert send.sent == []


def test_closed_store_raises_before_sending(engine: KeyValueStore[bytes, bytes], send: FakeSend) -> None:
    store = LoggedStore(engine, send, "cl", 0)
    store.close()
    with pytest.raises(StoreClosedError):
        store.put(b"a", b"1")
    assert send.sent == []


def test_failed_send_raises(engine: KeyValueStore[bytes, bytes]) -> None:
    def failing(
        topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None
    ) -> None:
        raise RuntimeError("broker down")

    with pytest.raises(RuntimeError, match="broker down"):
        LoggedStore(engine, failing, "cl", 0).put(b"a", b"1")


def test_changelog_gets_serialized_bytes_once_per_cache_flush(
    engine: KeyValueStore[bytes, bytes], send: FakeSend
) -> None:
    # Task layering: Cached -> Serialized -> Logged -> engine.
    typed = CachedStore(
        SerializedStore(LoggedStore(engine, send, "cl", 0), StringSerde(), LongSerde()), 100, 50
    )
    for _ in range(10):
        typed.put("word", (typed.get("word") or 0) + 1)
    typed.delete("gone")
    assert send.sent == []  # all in the cache so far
    typed.flush()
    assert sorted(send.sent, key=lambda s: s[2] or b"") == [
        ("cl", None, b"gone", 0),
        ("cl", LongSerde().to_bytes(10), b"word", 0),
    ]
