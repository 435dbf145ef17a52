"""What turns an adjunct store's records into rows, recorded with its offsets: a change rebuilds the store."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from samsa.adjunct.extractors import extractor_factory_key
from samsa.adjunct.manager import BUILTIN, MANAGER_FACTORY_KEY
from samsa.runtime.config.config import Config
from samsa.streams import SystemStreamPartition

__all__ = ["SOURCES", "BuildSettings", "build_change", "build_settings"]

log = logging.getLogger(__name__)

# Serde options that do not change how a record decodes: the registry's credentials (a secret, never to be
# written to the offsets file or logged; rotating it must not rebuild the store) and whether a writer
# registers schemas.
_NOT_DECODING = frozenset({"basic.auth.user.info", "auto.register.schemas"})
# Options whose presence changes decoding (the Confluent wire format) but whose value does not: a registry
# moved to another address serves the same schema ids.
_PRESENCE_ONLY = frozenset({"schema.registry.url"})

BuildSettings = dict[str, str | None]
"""Config key (or `SOURCES`) -> its value, of everything that decides the store's rows."""

SOURCES = "source partitions"
"""The settings' entry listing the partitions the store is fed from (`stores.<s>.adstore.input`, and
`task.broadcast.inputs` for a broadcast store)."""


def build_settings(
    config: Config,
    store: str,
    key_serde: str | None,
    msg_serde: str | None,
    sources: Mapping[SystemStreamPartition, tuple[str | None, str | None]],
) -> BuildSettings:
    """The settings the store's rows depend on, keyed by the config key a user would change: its
    extractor (and any key of the extractor's own), the adjunct manager, the store's serdes, the key and
    message serdes its source streams are decoded with, the definitions (`serializers.registry.<name>.*`)
    of every serde named, and which partitions feed it. `sources`: partition -> its stream's (key serde,
    msg serde) names."""
    extractor = config.value(extractor_factory_key(store))
    out: BuildSettings = {
        extractor_factory_key(store): _normal(extractor),
        MANAGER_FACTORY_KEY: _normal(config.value(MANAGER_FACTORY_KEY)) or BUILTIN,
        f"stores.{store}.key.serde": key_serde,
        f"stores.{store}.msg.serde": msg_serde,
        SOURCES: ",".join(_name(ssp) for ssp in sorted(sources)),
    }
    own = f"stores.{store}.adstore.key.value.extractor."
    out.update({own + k: v for k, v in config.subset(own).items() if own + k not in out})
    serdes = {key_serde, msg_serde}
    for ssp, (stream_key, stream_msg) in sources.items():
        prefix = f"systems.{ssp.system}.streams.{ssp.stream}.samza."
        out[prefix + "key.serde"], out[prefix + "msg.serde"] = stream_key, stream_msg
        serdes |= {stream_key, stream_msg}
    for name in sorted(s for s in serdes if s):
        prefix = f"serializers.registry.{name}."
        for option, value in config.subset(prefix).items():
            if option in _NOT_DECODING:
                continue
            out[prefix + option] = "set" if option in _PRESENCE_ONLY and value else value
    return out


def build_change(
    recorded: Mapping[str, object] | None,
    current: BuildSettings,
    store: str = "?",
    record: str = "offsets file",
) -> str | None:
    """What changed between the settings the store was built with and `current`, naming the keys; None
    when nothing did. Settings not recorded (an offsets file, or a versioned store's `record`, of an older
    Samsa) are taken to be the current ones, with a warning: that Samsa trusted every store it found, and a
    forced rebuild of every adjunct store at the upgrade would hold up the jobs whose streams are
    bootstrapped; the next offsets file (or version pointer) records them."""
    if recorded is None:
        log.warning(
            "adjunct store %s: its %s (an older Samsa's) records no build settings; taking it as built with "
            "the current extractor, serdes and source partitions. If one of them changed while upgrading, "
            "delete the store's directory on each host to rebuild it",
            store,
            record,
        )
        return None
    changes = [
        f"{key} changed from {_shown(recorded.get(key))} to {_shown(current.get(key))}"
        for key in sorted(set(recorded) | set(current), key=lambda k: (k != SOURCES, k))
        if recorded.get(key) != current.get(key)
    ]
    return "; ".join(changes) if changes else None


def _normal(value: object) -> str | None:
    """A factory value as it takes effect (`Debezium ` is `debezium`); None when unset or blank."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    return text.lower() if text.lower() in ("debezium", "builtin") else text


def _shown(value: object) -> str:
    return "unset" if value is None else repr(value)


def _name(ssp: SystemStreamPartition) -> str:
    return f"{ssp.system}.{ssp.stream}#{ssp.partition}"
