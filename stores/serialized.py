"""The layer that turns typed keys and values into bytes for the engine below, with the job's serdes."""

from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar

from samsa.serde.base import explain, fast_from_bytes, fast_to_bytes, value_check
from samsa.serde.exceptions import SchemaRegistryError, SerdeConfigError
from samsa.stores.api import K, KeyValueSnapshot, KeyValueStore, LayeredSnapshot, V
from samsa.stores.exceptions import NoneKeyError, StoreSerdeMismatchError

T = TypeVar("T")


class _Serde(Protocol[T]):
    """What this layer needs of a serde (`samsa.serde.Serde` has this shape; kept local to stay decoupled)."""

    def to_bytes(self, obj: T) -> bytes: ...

    def from_bytes(self, data: bytes) -> T: ...


class SerializedStore(KeyValueStore[K, V]):
    """A typed store over a bytes store: keys through `key_serde`, values through `msg_serde`.

    None values never reach the serdes: `put(k, None)` deletes, and absent keys read as None. A None key
    raises `NoneKeyError` at every call, whatever the serdes and the engine (serdes pass None through, and
    the engines would differ on it). Ordering of `range`/`all` is the serialized key order. Serde errors
    writing propagate as the serde's own descriptive error, with a note naming the store, the call, the type
    refused, the `stores.<name>.*.serde` key and what to do; stored bytes a serde cannot read raise
    `StoreSerdeMismatchError` (a config-like error: a restart meets the same bytes).
    """

    def __init__(
        self, inner: KeyValueStore[bytes, bytes], key_serde: _Serde[K], msg_serde: _Serde[V]
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.key_serde = key_serde
        self.msg_serde = msg_serde
        #: The value serde's cheap check (`samsa.serde.base.value_check`), None without one: a layer that
        #: defers writing (the object cache) calls it at `put`; its failure is explained by `rejected`.
        self.value_check = value_check(msg_serde)
        # Bound once: these run per message.
        self._key_bytes = key_serde.to_bytes
        self._key_obj = key_serde.from_bytes
        self._value_bytes = msg_serde.to_bytes
        self._value_obj = msg_serde.from_bytes
        # get/put use the serdes' C-level paths when they have them; a failure is re-explained below.
        self._fast_key_bytes = fast_to_bytes(key_serde)
        self._fast_value_bytes = fast_to_bytes(msg_serde)
        self._fast_value_obj = fast_from_bytes(msg_serde)
        self._inner_get = inner.get
        self._inner_put = inner.put
        #: Writes taken since the store opened (puts, deletes, batch entries): tells a commit whether the
        #: task wrote anything since the last one (`TaskStorage.writes`).
        self.writes = 0

    def get(self, key: K) -> V | None:
        if key is None:
            raise self._no_key("get(None)")
        try:
            raw = self._inner_get(self._fast_key_bytes(key))
        except Exception as e:
            raise self._explained(e, f"get({key!r:.200})", key) from None
        if raw is None:
            return None
        try:
            value: V = self._fast_value_obj(raw)
        except Exception as e:
            raise self._unreadable(e, "msg", raw, f"get({key!r:.200})")  # noqa: B904 (chained inside)
        return value

    def put(self, key: K, value: V | None) -> None:
        if key is None:
            raise self._no_key("put(None, ...)")
        self.writes += 1
        try:
            self._inner_put(
                self._fast_key_bytes(key), None if value is None else self._fast_value_bytes(value)
            )
        except Exception as e:
            raise self._explained(e, f"put({key!r:.200}, ...)", key, value) from None

    def key_bytes(self, key: K) -> bytes:
        """`key` serialized as this store writes it; a failure raises the serde's descriptive error."""
        if key is None:
            raise self._no_key()
        try:
            return self._fast_key_bytes(key)
        except Exception as e:
            raise self._explained(e, f"key {key!r:.200}", key) from None

    def rejected(self, error: Exception, key: K, value: V) -> Exception:
        """The error to raise for a `put(key, value)` that failed with `error` (e.g. in `value_check`)."""
        return self._explained(error, f"put({key!r:.200}, ...)", key, value)

    def _no_key(self, call: str | None = None) -> NoneKeyError:
        """The error of a call with the key None."""
        return NoneKeyError(self.name, getattr(self.key_serde, "name", type(self.key_serde).__name__), call)

    def _explained(self, error: Exception, call: str, key: K, value: V | None = None) -> Exception:
        """The serde's descriptive error when a serde failed, noting the store, the call and the fix."""
        part = self._refusing(key, value)
        if part is None:  # not the serdes: the store below failed
            error.add_note(f"in store {self.name!r}: {call}")
            return error
        serde, refused = (self.key_serde, key) if part == "key" else (self.msg_serde, value)
        described = explain(serde.to_bytes, refused, error)
        if described is not error:
            described.__cause__ = error
        setting = f"stores.{self.name}.{part}.serde"
        kind = type(refused).__name__
        what = "key" if part == "key" else "value"
        described.add_note(
            f"in store {self.name!r}: {call}: the {what} is of type {kind}, which "
            f"{setting} (the {getattr(serde, 'name', type(serde).__name__)} serde) cannot serialize; "
            f"{'use keys' if part == 'key' else 'put values'} of a type that serde takes, or set {setting} "
            f"to a serde for {kind}"
        )
        return described

    def _unreadable(self, error: Exception, part: str, raw: bytes, call: str) -> Exception:
        """The error to raise when the `part` ("key" or "msg") serde failed with `error` to read stored
        bytes `raw`: `StoreSerdeMismatchError`, but the serde's own error for a registry outage (a restart
        may mend it) or a serde config error (already a config error naming its key)."""
        serde = self.key_serde if part == "key" else self.msg_serde
        described = explain(serde.from_bytes, raw, error)
        if isinstance(described, SchemaRegistryError | SerdeConfigError):
            described.add_note(f"in store {self.name!r}: {call}")
            return described
        name = getattr(serde, "name", type(serde).__name__)
        mismatch = StoreSerdeMismatchError(self.name, part, name, call, described)
        mismatch.__cause__ = described
        return mismatch

    def _refusing(self, key: K, value: V | None) -> str | None:
        """Which serde refuses this entry: `key`, `msg` (the value's), or None when both take it."""
        for part, convert, obj in (
            ("key", self._fast_key_bytes, key),
            ("msg", self._fast_value_bytes, value),
        ):
            if obj is None and part == "msg":
                continue
            try:
                convert(obj)
            except Exception:
                return part
        return None

    def delete(self, key: K) -> None:
        if key is None:
            raise self._no_key("delete(None)")
        self.writes += 1
        try:
            self.inner.delete(self._key_bytes(key))
        except Exception as e:
            e.add_note(f"in store {self.name!r}: delete({key!r:.200})")
            raise

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        self._write_all(entries, "put_all(...)")

    def delete_all(self, keys: Iterable[K]) -> None:
        self._write_all([(key, None) for key in keys], "delete_all(...)")

    def _write_all(self, entries: Iterable[tuple[K, V | None]], call: str) -> None:
        """One batch below: `put_all` (None values delete) or `delete_all`, called `call` in a None key's
        error."""
        key_bytes, value_bytes = self._fast_key_bytes, self._fast_value_bytes
        entries = entries if isinstance(entries, list) else list(entries)
        self.writes += len(entries)
        try:  # all serialized before any is written: the batch stays atomic
            raw = [(key_bytes(k), None if v is None else value_bytes(v)) for k, v in entries if k is not None]
        except Exception:
            for key, value in entries:  # again, one by one, to name the entry at fault
                if key is None:
                    raise self._no_key(call) from None
                try:
                    key_bytes(key), None if value is None else value_bytes(value)
                except Exception as e:
                    raise self._explained(e, f"put({key!r:.200}, ...)", key, value) from None
            raise
        if len(raw) != len(entries):  # the comprehension left the None keys out
            raise self._no_key(call)
        self.inner.put_all(raw)

    def get_all(self, keys: Iterable[K]) -> dict[K, V]:
        by_raw = {self.key_bytes(key): key for key in keys}
        value_obj = self._value_obj
        found = self.inner.get_all(by_raw)
        try:
            return {by_raw[raw_key]: value_obj(raw) for raw_key, raw in found.items()}
        except Exception:
            for raw_key, raw in found.items():  # again, one by one, to name the entry at fault
                try:
                    value_obj(raw)
                except Exception as e:
                    call = f"get_all(...) at {by_raw[raw_key]!r:.200}"
                    raise self._unreadable(e, "msg", raw, call)  # noqa: B904 (chained inside)
            raise

    def range(self, from_key: K, to_key: K) -> Iterator[tuple[K, V]]:
        if from_key is None or to_key is None:
            raise self._no_key(f"range({from_key!r:.200}, {to_key!r:.200})")
        return self._decoded(self.inner.range(self._key_bytes(from_key), self._key_bytes(to_key)))

    def all(self) -> Iterator[tuple[K, V]]:
        return self._decoded(self.inner.all())

    def snapshot(self, from_key: K, to_key: K) -> KeyValueSnapshot[K, V]:
        if from_key is None or to_key is None:
            raise self._no_key(f"snapshot({from_key!r:.200}, {to_key!r:.200})")
        inner = self.inner.snapshot(self._key_bytes(from_key), self._key_bytes(to_key))
        return LayeredSnapshot(inner, self._decoded)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def _decoded(self, entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[K, V]]:
        # A generator: abandoning it drops `entries`, which releases the engine's iterator.
        key_obj, value_obj = self._key_obj, self._value_obj
        for raw_key, raw in entries:
            try:
                entry = key_obj(raw_key), value_obj(raw)
            except Exception as e:
                try:
                    key = key_obj(raw_key)
                except Exception as key_error:
                    call = f"iterating at serialized key {raw_key!r:.200}"
                    raise self._unreadable(key_error, "key", raw_key, call)  # noqa: B904 (chained inside)
                raise self._unreadable(e, "msg", raw, f"iterating at key {key!r:.200}")  # noqa: B904
            yield entry

    def __repr__(self) -> str:
        return f"SerializedStore({self.inner!r})"
