"""Store definitions read from `stores.<s>.*` config, and opening the bytes engine each one names."""

import importlib
import inspect
import re
import traceback
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
#: `stores.<s>.factory` values (any case) naming a built-in engine; any other names a custom one.
ENGINE_NAMES = frozenset(_FACTORY_ALIASES)
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

    A custom factory (`stores.<s>.factory=module:Class`) is a `samsa.stores.api.KeyValueStore` subclass
    called as `Class(path, spec)`; it must return a `KeyValueStore[bytes, bytes]`. One that is not, or whose
    constructor does not take those arguments, is a `StoreConfigError` naming the key (`check_factory`).
    """
    if spec.factory == ROCKSDB:
        return RocksDbStore(path, spec.rocksdb, name=spec.name)
    if spec.factory == INMEMORY:
        return InMemoryStore(spec.name)
    factory = cast(Callable[[Path, StoreSpec], object], check_factory(spec))
    try:
        engine = factory(path, spec)
    except TypeError as e:
        # Deterministic: a restart would fail the same way, so a config error (not restarted) naming the key.
        raise StoreConfigError(
            spec.key("factory"),
            f"{spec.factory}(path, spec) raised TypeError: {e}{_raised_at(e)}; {_FACTORY_CONTRACT}",
        ) from e
    if not isinstance(engine, KeyValueStore):
        raise StoreConfigError(
            spec.key("factory"),
            f"{spec.factory} returned a {type(engine).__name__}, not a store; {_FACTORY_CONTRACT}",
        )
    return engine


_FACTORY_CONTRACT = (
    "a store factory is a subclass of samsa.stores.api.KeyValueStore (bytes keys and values) whose "
    "constructor takes (path: pathlib.Path, spec: samsa.stores.factory.StoreSpec): the store's directory "
    "and its definition (spec.config: its stores.<s>.* keys); or use rocksdb or inmemory (docs/state.md, "
    "Custom engines)"
)


def check_factory(spec: StoreSpec) -> type[KeyValueStore[bytes, bytes]] | None:
    """The class of a custom `stores.<s>.factory`, checked without building an engine: it imports, is a
    concrete `KeyValueStore` subclass, and its constructor accepts `(path, spec)`; None for `rocksdb` and
    `inmemory`. Raises `StoreConfigError` naming the key, the class and what a factory must be (run before
    containers start, and again by `open_engine`)."""
    if spec.factory in (ROCKSDB, INMEMORY):
        return None
    key = spec.key("factory")
    target = _resolve_factory(spec)
    if not issubclass(target, KeyValueStore):
        kind = next(
            (f"a {base.__module__}.{base.__qualname__}" for base in target.__mro__[1:-1] if base.__module__),
            "a plain class",
        )
        raise StoreConfigError(
            key,
            f"{spec.factory} ({target.__module__}.{target.__qualname__}, {kind}) is not a store factory; "
            f"{_FACTORY_CONTRACT}",
        )
    if inspect.isabstract(target):
        missing = ", ".join(sorted(getattr(target, "__abstractmethods__", ())))
        raise StoreConfigError(
            key,
            f"{spec.factory} is abstract: it does not implement {missing}{_defined_at(target)}; "
            f"{_FACTORY_CONTRACT}",
        )
    try:
        inspect.signature(target).bind(Path(), spec)
    except TypeError as e:
        raise StoreConfigError(
            key,
            f"{spec.factory}{_signature(target)} cannot be called as {target.__qualname__}(path, spec) "
            f"({e}){_defined_at(target)}; {_FACTORY_CONTRACT}",
        ) from None
    except ValueError:  # no signature to read (a C-level class): its call says
        pass
    return cast(type[KeyValueStore[bytes, bytes]], target)


def _signature(target: type) -> str:
    try:
        return str(inspect.signature(target).replace(return_annotation=inspect.Signature.empty))
    except (TypeError, ValueError):
        return "(...)"


def _defined_at(target: type) -> str:
    try:
        code = getattr(target, "__init__").__code__  # noqa: B009 - mypy: __init__ of a type
    except AttributeError:
        return ""
    return f" (its __init__ is at {code.co_filename}:{code.co_firstlineno})"


def _raised_at(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if len(frames) > 1 else ""


def _resolve_factory(spec: StoreSpec) -> type:
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
        found = "" if target is None else f" (it is a {type(target).__name__})"
        raise StoreConfigError(
            key, f"module {module_name!r} has no class {attr!r}{found}; {_FACTORY_CONTRACT}"
        )
    return target
