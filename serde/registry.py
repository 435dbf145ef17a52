"""SerdeRegistry: resolves serde names from `serializers.registry.*` config to Serde instances."""

import functools
import importlib
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from samsa.factories import requires_positional
from samsa.serde.base import Serde
from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde
from samsa.serde.exceptions import SerdeConfigError
from samsa.serde.keys import OPTIONS_BY_ALIAS, PREFIX, SERDE_CONFIG_KEYS, serde_key
from samsa.serde.schema_registry import SchemaRegistryClient

if TYPE_CHECKING:  # avro.py pulls in fastavro; import it only when an avro serde is built
    from samsa.serde.avro import AvroSerdeFactory

__all__ = ["BUILTIN_SERDES", "SERDE_CONFIG_KEYS", "SERDE_NAMES", "SerdeRegistry"]

BUILTIN_SERDES: tuple[str, ...] = ("bytes", "string", "json", "integer", "long", "avro")

_PLAIN_BUILTINS: dict[str, Callable[[], Serde[Any]]] = {
    "bytes": BytesSerde,
    "string": StringSerde,
    "json": JsonSerde,
    "integer": IntegerSerde,
    "long": LongSerde,
}

# Samza's Java factory names, so a Samza job's config keeps working unchanged.
_SAMZA_FACTORIES = {
    "org.apache.samza.serializers.ByteSerdeFactory": "bytes",
    "org.apache.samza.serializers.ByteBufferSerdeFactory": "bytes",
    "org.apache.samza.serializers.StringSerdeFactory": "string",
    "org.apache.samza.serializers.JsonSerdeFactory": "json",
    "org.apache.samza.serializers.JsonSerdeV2Factory": "json",
    "org.apache.samza.serializers.IntegerSerdeFactory": "integer",
    "org.apache.samza.serializers.LongSerdeFactory": "long",
}
#: `serializers.registry.<name>.class` values naming a built-in serde; any other is a factory path.
SERDE_NAMES = frozenset((*BUILTIN_SERDES, *_SAMZA_FACTORIES))


class SerdeRegistry:
    """The serdes a job can name: the built-ins plus those defined by `serializers.registry.<name>.class`.

    `serializers.registry.<name>.class` is a built-in alias (bytes, string, json, integer, long, avro), a
    Samza factory class name for one of them, or a factory path `module:attr` / `module.attr`. A factory
    path names a callable: it is called as `attr(name, options)` when its signature takes two positional
    arguments and cannot be called without any, else as `attr()` (so a Serde class whose constructor takes
    no arguments, or only ones with defaults, works and keeps its defaults), and must return a Serde.
    `options` holds the other `serializers.registry.<name>.*` keys with that prefix stripped. Everything is
    checked when the registry is built, except the unconfigured built-in `avro`, which
    fails on `get` because it has no schema.
    """

    def __init__(self, config: Mapping[str, str]) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str | None], SchemaRegistryClient] = {}
        self._plain: dict[str, Serde[Any]] = {name: make() for name, make in _PLAIN_BUILTINS.items()}
        self._avro: dict[str, AvroSerdeFactory | None] = {"avro": None}  # None: built on first get
        for name, options in _options_by_name(config).items():
            self._define(name, dict(options))

    @property
    def names(self) -> list[str]:
        """Every serde name `get` resolves, sorted."""
        return sorted({*self._plain, *self._avro})

    def get(self, name: str, topic: str | None = None, is_key: bool = False) -> Serde[Any]:
        """The serde called `name`; `topic` and `is_key` pick the schema registry subject for avro."""
        serde = self._plain.get(name)
        if serde is not None:
            return serde
        if name not in self._avro:
            raise SerdeConfigError(
                f"unknown serde {name!r}: known serdes are {', '.join(self.names)}; define others with "
                f"{serde_key('<name>', 'class')}"
            )
        factory = self._avro[name]
        if factory is None:
            factory = self._avro[name] = self._avro_factory(name, {})
        return factory.get(topic, is_key)

    def _define(self, name: str, options: dict[str, str]) -> None:
        key = serde_key(name, "class")
        target = options.pop("class", name if name in BUILTIN_SERDES else None)
        if target is None:
            raise SerdeConfigError(f"{serde_key(name, next(iter(options)))} is set but {key} is missing")
        target = _SAMZA_FACTORIES.get(target.strip(), target.strip())
        self._avro.pop(name, None)
        self._plain.pop(name, None)
        if target in BUILTIN_SERDES:
            known = OPTIONS_BY_ALIAS.get(target, {})
            for option in options:
                if option not in known:
                    raise SerdeConfigError(
                        f"{serde_key(name, option)}: the {target} serde has no such option"
                        + (f"; known: {', '.join(known)}" if known else "")
                    )
        if target == "avro":
            self._avro[name] = self._avro_factory(name, options)
        elif target == "string":
            self._plain[name] = StringSerde(_encoding(name, options.get("encoding", "utf-8")))
        elif target in _PLAIN_BUILTINS:
            self._plain[name] = _PLAIN_BUILTINS[target]()
        else:
            self._plain[name] = _from_factory(key, target, name, options)

    def _avro_factory(self, name: str, options: Mapping[str, str]) -> "AvroSerdeFactory":
        from samsa.serde.avro import AvroSerdeFactory

        return AvroSerdeFactory(name, options, self._client_for)

    def _client_for(self, url: str, user_info: str | None) -> SchemaRegistryClient:
        """One client per registry, so every serde shares its id and schema caches."""
        with self._lock:
            client = self._clients.get((url, user_info))
            if client is None:
                client = self._clients[(url, user_info)] = SchemaRegistryClient(url, user_info)
            return client


def _options_by_name(config: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Group `serializers.registry.<name>.<option>` keys by name; a name is one dot-free segment."""
    grouped: dict[str, dict[str, str]] = {}
    for key, value in config.items():
        if not key.startswith(PREFIX):
            continue
        name, dot, option = key[len(PREFIX) :].partition(".")
        if not name or not dot or not option:
            raise SerdeConfigError(f"{key}: malformed; expected {serde_key('<name>', '<option>')}")
        grouped.setdefault(name, {})[option] = value
    return grouped


def _encoding(name: str, encoding: str) -> str:
    try:
        "".encode(encoding)
    except LookupError as exc:
        raise SerdeConfigError(f"{serde_key(name, 'encoding')}={encoding!r}: unknown text encoding") from exc
    return encoding


def _from_factory(key: str, path: str, name: str, options: Mapping[str, str]) -> Serde[Any]:
    """Import the factory at `path` (`module:attr` or `module.attr`) and build a serde with it."""
    factory = _import(key, path)
    try:
        two_args = requires_positional(factory, 2)
        serde = factory(name, options) if two_args else factory()
    except Exception as exc:
        raise SerdeConfigError(f"{key}={path!r}: the factory failed: {exc!r}") from exc
    if not isinstance(serde, Serde):
        raise SerdeConfigError(
            f"{key}={path!r}: the factory returned {type(serde).__name__}, which lacks to_bytes/from_bytes"
        )
    return serde


def _import(key: str, path: str) -> Callable[..., Any]:
    module_name, colon, attr = path.partition(":")
    if not colon:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise SerdeConfigError(
            f"{key}={path!r}: expected a built-in serde ({', '.join(BUILTIN_SERDES)}) "
            "or a factory path module:attr / module.attr"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SerdeConfigError(f"{key}={path!r}: cannot import module {module_name!r}: {exc}") from exc
    try:
        factory = functools.reduce(getattr, attr.split("."), module)
    except AttributeError as exc:
        raise SerdeConfigError(f"{key}={path!r}: module {module_name!r} has no {attr!r}") from exc
    if not callable(factory):
        raise SerdeConfigError(f"{key}={path!r}: {attr!r} is not callable")
    return factory
