"""A store's `range`/`all` iterator yields the store as of the call, whatever is written while it runs, on
both engines and through the stack a task gets (object cache on and off): docs/state.md's promise."""

from __future__ import annotations

from typing import Any

import pytest

from samsa import (
    IncomingMessageEnvelope,
    MessageCollector,
    OutgoingMessage,
    StreamTask,
    TaskContext,
    TaskCoordinator,
)
from samsa.stores.api import KeyValueStore
from samsa.testing import TestRunner

Store = KeyValueStore[bytes, bytes]


def _fill(store: Store, n: int) -> dict[bytes, bytes]:
    entries = {b"k%04d" % i: b"v%d" % i for i in range(n)}
    store.put_all(list(entries.items()))
    return entries


def test_an_engine_iterator_ignores_deletes_updates_and_inserts_made_while_it_runs(engine: Store) -> None:
    before = _fill(engine, 20)
    seen = []
    for key, value in engine.all():
        seen.append((key, value))
        engine.delete(key)
        engine.put(b"k0019", b"changed")
        engine.put(key + b"-new", b"added")
    assert seen == sorted(before.items())
    assert engine.get(b"k0019") == b"changed"


def test_an_engine_iterator_made_before_writes_yields_the_store_as_of_the_call(engine: Store) -> None:
    before = _fill(engine, 10)
    whole, part = engine.all(), engine.range(b"k0002", b"k0005")
    first = next(part)
    engine.delete(b"k0003")
    engine.put(b"k0004", b"changed")
    engine.put(b"k0002a", b"added")
    engine.put_all([(b"k0000", None), (b"k0009", b"changed")])
    assert [first, *part] == [(k, before[k]) for k in (b"k0002", b"k0003", b"k0004")]
    assert list(whole) == sorted(before.items())
    # A later iterator sees the writes.
    assert dict(engine.range(b"k0002", b"k0005")) == {
        b"k0002": b"v2",
        b"k0002a": b"added",
        b"k0004": b"changed",
    }


N = 1200  # more writes than stores.<s>.write.batch.size (500): the cache writes some below while iterating


class _WalkWhileWriting(StreamTask):
    """Fills the store, makes an iterator, rewrites every key while walking it, and sends what it saw."""

    def init(self, context: TaskContext) -> None:
        self.store: Any = context.store("s")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        for i in range(N):
            self.store.put(f"k{i:04d}", i)
        walk, part = self.store.all(), self.store.range("k0100", "k0200")
        self.store.delete("k0003")  # before the first step: still seen
        seen = {}
        for key, value in walk:
            seen[key] = value
            self.store.delete(key)
            self.store.put(key + "-new", -1)
            self.store.put("k1199", -2)
        ranged = dict(part)
        collector.send(
            OutgoingMessage("kafka", "out", key="seen", value=[seen, ranged, dict(self.store.all())])
        )


@pytest.mark.parametrize("cache", ["0", "1000"])
@pytest.mark.parametrize("factory", ["rocksdb", "inmemory"])
def test_a_task_walking_a_store_while_writing_it_sees_the_store_as_of_the_call(
    factory: str, cache: str
) -> None:
    config = {
        "stores.s.factory": factory,
        "stores.s.key.serde": "string",
        "stores.s.msg.serde": "json",
        "stores.s.object.cache.size": cache,
    }
    result = (
        TestRunner.of(_WalkWhileWriting).with_config(config).add_input("in", ["go"]).add_output("out").run()
    )
    ((seen, ranged, after),) = result.output("out")
    assert seen == {f"k{i:04d}": i for i in range(N)}
    assert ranged == {f"k{i:04d}": i for i in range(100, 200)}
    assert after == {**{f"k{i:04d}-new": -1 for i in range(N)}, "k1199": -2}
