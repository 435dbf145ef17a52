"""A validated job config: raw string values plus typed access through the key registry."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from samsa.runtime.config.keys import KEYS, STORE_NAMESPACES, build_registry
from samsa.runtime.config.loader import load_raw
from samsa.runtime.config.registry import Key, KeyRegistry, OwnKeys
from samsa.runtime.exceptions import ConfigError


@cache
def default_registry() -> KeyRegistry:
    """The job-config registry, with the serde options the serde package documents and the namespaces of
    custom components' own keys (a custom store engine, serde factory or adjunct extractor)."""
    from samsa.adjunct.extractors import DEBEZIUM
    from samsa.serde.registry import SERDE_CONFIG_KEYS, SERDE_NAMES
    from samsa.stores.factory import ENGINE_NAMES
    from samsa.stores.rocksdb_options import CONTAINER_ROCKSDB_KEYS, ROCKSDB_KEYS

    known = {k.pattern for k in KEYS}
    extra = [Key(pattern, "str", doc) for pattern, doc in SERDE_CONFIG_KEYS.items() if pattern not in known]
    # The stores package parses and checks its RocksDB options; the registry documents them.
    extra += [Key(f"stores.<s>.{sub}", "str", option.doc) for sub, option in ROCKSDB_KEYS.items()]
    extra += [Key(key, "str", option.doc) for key, option in CONTAINER_ROCKSDB_KEYS.items()]
    # What each custom component is given: the StoreSpec's config, a serde factory's options, an
    # extractor factory's options (docs/state.md, SerdeRegistry, docs/adjunct.md).
    own = [
        OwnKeys(
            "stores.<s>.*",
            "stores.<s>.factory",
            ENGINE_NAMES,
            "store engine",
            reserved=tuple(f"stores.<s>.{namespace}.*" for namespace in STORE_NAMESPACES),
        ),
        OwnKeys(
            "serializers.registry.<name>.*",
            "serializers.registry.<name>.class",
            frozenset(n.lower() for n in SERDE_NAMES),
            "serde factory",
        ),
        OwnKeys(
            "stores.<s>.adstore.key.value.extractor.*",
            "stores.<s>.adstore.key.value.extractor.factory",
            frozenset((DEBEZIUM,)),
            "adjunct extractor",
        ),
    ]
    return build_registry(extra, own)


class Config(Mapping[str, str]):
    """Every key is checked at construction: an unknown key under a Samsa prefix or a bad value fails."""

    def __init__(self, raw: Mapping[str, str], registry: KeyRegistry | None = None) -> None:
        self._raw = {str(k): str(v) for k, v in raw.items()}
        self.registry = registry or default_registry()
        self._typed: dict[str, object] = {}
        # Every wrong key is named at once: a config ported from Samza is fixed in one go, not a key a run.
        errors: dict[str, ConfigError] = {}
        for key, value in self._raw.items():
            try:
                self._check(key, value)
            except ConfigError as e:
                errors[key] = e
        if len(errors) == 1:
            raise next(iter(errors.values()))
        if errors:
            # The first line names them all (a log line read alone), then each key's error on a line.
            raise ConfigError(
                f"{len(errors)} keys of the job config are wrong ({', '.join(errors)}):"
                + "".join(f"\n  - {e}" for e in errors.values())
            )

    def _check(self, key: str, value: str) -> None:
        """Parses one key's value into `_typed`; raises naming the key when it is unknown or malformed."""
        found = self.registry.lookup(key)
        if found is None:
            if self.registry.governs(key):
                close = self.registry.suggest(key)
                own = self.registry.own_namespace(key)
                if own is not None and own.is_custom(self._raw, key):
                    if close is None:
                        return  # a key of a custom component's own, which it reads itself
                    # A custom component takes unknown keys, yet not a typo of Samsa's (a misspelt
                    # `changelog` would silently leave a store without one).
                    raise ConfigError(
                        f"unknown config key {key!r}; did you mean {close!r}? (the custom {own.component} "
                        f"that {own.selector_of(key)} names takes keys of its own, but not one a typo away "
                        "from a Samsa key: rename it)"
                    )
                hint = f"; did you mean {close!r}?" if close else "; see `samsa config keys`"
                samsa = self.registry.samsa_namespace(key)
                if own is not None and close is None:
                    hint += (
                        f" (keys of one's own there are taken only by a custom {own.component}: "
                        f"{own.selector_of(key)} set to a module:attr path)"
                    )
                elif samsa is not None and close is None:
                    part, owner = samsa
                    hint += (
                        f" ({part} keys are Samsa's, checked under a custom {owner.component} too; its "
                        f"keys of its own go elsewhere in {owner.pattern.filled(key, owner.namespace)})"
                    )
                raise ConfigError(f"unknown config key {key!r}{hint}")
            meant = self.registry.misspelled_prefix(key)
            if meant is not None:
                raise ConfigError(
                    f"unknown config key {key!r}; did you mean {meant!r}? ({key.split('.')[0]!r} is "
                    "not a Samsa prefix, and the key would be ignored as one of the task's own)"
                )
            return  # a user's own key, for their task to read
        self._typed[key] = found[0].parse(key, value, self._raw)

    @classmethod
    def load(cls, source: str | Path | Mapping[str, Any]) -> Config:
        """Loads and validates a .properties / YAML file or a dict."""
        return cls(load_raw(source))

    def __getitem__(self, key: str) -> str:
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def value(self, key: str) -> Any:
        """The typed value of `key`, its registry default when unset, or None."""
        if key in self._typed:
            return self._typed[key]
        found = self.registry.lookup(key)
        if found is None:
            return self._raw.get(key)
        entry = found[0]
        if entry.default is None:
            return None
        return Key(entry.pattern, entry.type, entry.doc, choices=entry.choices).parse(key, entry.default)

    def required(self, key: str) -> Any:
        """The typed value of `key`; raises naming the key when it is unset."""
        value = self.value(key)
        if value is None or value == "" or value == []:
            raise ConfigError(f"{key} is required; set it in the job config")
        return value

    def subset(self, prefix: str) -> dict[str, str]:
        """Keys under `prefix`, with the prefix stripped (e.g. librdkafka pass-through settings)."""
        return {k[len(prefix) :]: v for k, v in self._raw.items() if k.startswith(prefix)}

    def with_overrides(self, overrides: Mapping[str, str]) -> Config:
        """A new validated config with `overrides` applied."""
        return Config({**self._raw, **overrides}, self.registry)
