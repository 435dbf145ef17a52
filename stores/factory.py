"""Store definitions read from `stores.<s>.*` config, and opening the bytes engine each one names."""

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from samsa.stores.api import KeyValueStore
from samsa.stores.exceptions import StoreConfigError
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.rocksdb_options import RocksDbOptions

ROCKSDB = "rocksdb"
INMEMORY = "inmemory"
# Samza's factory class names are accepted so Samza job configs carry over unchanged.
_FACTORY_ALIASES = {
    "rocksdb": ROCKSDB,
    "org.apache.samza.storage.kv.rocksdbkeyvaluestorageenginefactory": ROCKSDB,
    "inmemory": INMEMORY,
    "in-memory": INMEMORY,
    "org.apache.samza.storage.kv.inmemory.inmemorykeyvaluestorageenginefactory": INMEMORY,
}
DEFAULT_SERDE = "bytes"

#: `stores.*` keys that configure all stores rather than one store named by their second segment.
GLOBAL_STORE_KEYS = frozenset(
    {
        "stores.backup.factories",
        "stores.restore.factories",
        "stores.restore.parallelism",
        "stores.adstore.manager.factory",
    }
)


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """One store as the job config defines it."""

    name: str
    #: `rocksdb`, `inmemory`, or a `module:Class` / `module.Class` path to a custom engine class.
    factory: str
    key_serde: str = DEFAULT_SERDE
    msg_serde: str = DEFAULT_SERDE
    #: `<system>.<stream>` of the changelog, or None for a store without one.
    changelog: str | None = None
    #: Parsed `rocksdb.*` options when `factory` is `rocksdb`, else None.
    rocksdb: RocksDbOptions | None = None
    #: All of this store's keys with the `stores.<name>.` prefix removed, for custom engines and layers.
    config: Mapping[str, str] = field(default_factory=dict, hash=False)

    def key(self, sub: str) -> str:
        """The full config key of one of this store's settings, for messages."""
        return f"stores.{self.name}.{sub}"


_CHECKPOINT_LIKE = re.compile(r".*-\d+-\d+")


def store_specs(config: Mapping[str, str]) -> dict[str, StoreSpec]:
    """Every store defined by `stores.<s>.*` keys, by name (sorted). Unknown keys are left to the registry."""
    per_store: dict[str, dict[str, str]] = {}
    for key, value in config.items():
        if not key.startswith("stores.") or key in GLOBAL_STORE_KEYS:
            continue
        name, _, sub = key.removeprefix("stores.").partition(".")
        if not sub:
            continue  # `stores.<s>` alone sets nothing of a store; the config registry reports it
        if not name:
            raise StoreConfigError(key, "empty store name; use stores.<name>.<setting>")
        if _CHECKPOINT_LIKE.fullmatch(name):
            # `<store>-<millis>-<nanos>` is where store <store> keeps its local checkpoints.
            raise StoreConfigError(key, f"store name {name!r} looks like a checkpoint directory; rename it")
        per_store.setdefault(name, {})[sub] = value
    return {name: _spec(name, per_store[name]) for name in sorted(per_store)}


def _spec(name: str, sub: Mapping[str, str]) -> StoreSpec:
    factory_key = f"stores.{name}.factory"
    raw_factory = sub.get("factory", "").strip()
    if not raw_factory:
        present = ", ".join(f"stores.{name}.{s}" for s in sorted(sub))
        raise StoreConfigError(
            factory_key,
            f"missing (store {name!r} has {present}); set it to rocksdb, inmemory or a module:Class path",
        )
    factory = _FACTORY_ALIASES.get(raw_factory.lower(), raw_factory)
    if factory not in (ROCKSDB, INMEMORY) and "." not in factory and ":" not in factory:
        raise StoreConfigError(
            factory_key, f"unknown factory {raw_factory!r}; use rocksdb, inmemory or a module:Class path"
        )
    return StoreSpec(
        name=name,
        factory=factory,
        key_serde=_optional(sub, "key.serde") or DEFAULT_SERDE,
        msg_serde=_optional(sub, "msg.serde") or DEFAULT_SERDE,
        changelog=_optional(sub, "changelog"),
        rocksdb=RocksDbOptions.from_config(name, sub) if factory == ROCKSDB else None,
        config=dict(sub),
    )


def _optional(sub: Mapping[str, str], key: str) -> str | None:
    # A blank value (`stores.s.changelog=` in a properties file) means unset, as in Samza.
    return sub.get(key, "").strip() or None


def open_engine(spec: StoreSpec, path: Path) -> KeyValueStore[bytes, bytes]:
    """Open the bytes engine of `spec`; `path` is the store's directory (unused by `inmemory`).

    A custom factory is called as `Class(path, spec)` and must return a `KeyValueStore[bytes, bytes]`.
    """
    if spec.factory == ROCKSDB:
        return RocksDbStore(path, spec.rocksdb, name=spec.name)
    if spec.factory == INMEMORY:
        return InMemoryStore(spec.name)
    engine = _resolve_factory(spec)(path, spec)
    if not isinstance(engine, KeyValueStore):
        raise StoreConfigError(
            spec.key("factory"),
            f"{spec.factory} returned a {type(engine).__name__}, not a store; "
            "subclass samsa.stores.api.KeyValueStore[bytes, bytes]",
        )
    return engine


def _resolve_factory(spec: StoreSpec) -> Callable[[Path, StoreSpec], object]:
    key = spec.key("factory")
    module_name, sep, attr = spec.factory.partition(":")
    if not sep:
        module_name, _, attr = spec.factory.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise StoreConfigError(key, f"cannot import module {module_name!r} of {spec.factory!r}: {e}") from e
    target = getattr(module, attr, None)
    if not isinstance(target, type):
        raise StoreConfigError(key, f"module {module_name!r} has no class {attr!r}")
    return cast(Callable[[Path, StoreSpec], object], target)
