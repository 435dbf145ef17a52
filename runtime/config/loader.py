"""Reads a job config from a .properties file, a YAML file or a dict into flat string keys."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from samsa.runtime.exceptions import ConfigError


def _flatten(data: Mapping[str, Any], prefix: str, out: dict[str, str], source: str) -> None:
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _flatten(value, f"{full}.", out, source)
        elif value is None:
            raise ConfigError(f"{source}: {full} has no value; give one or remove the key")
        else:
            out[full] = _to_text(value)


def _to_text(value: Any) -> str:
    # YAML turns `true` and `60000` into Python values; the registry parses the text form.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_to_text(v) for v in value)
    return str(value)


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parses Java .properties text: `key=value` or `key: value`, # and ! comments, \\ continuations."""
    out: dict[str, str] = {}
    pending = ""
    number = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip() if not pending else line.lstrip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        entry, pending = pending + stripped, ""
        _store_entry(entry, out, f"{source}:{number}")
    if pending:  # a continuation on the last line still ends its entry
        _store_entry(pending, out, f"{source}:{number}")
    return out


def _store_entry(entry: str, out: dict[str, str], where: str) -> None:
    split = min((i for i in (entry.find("="), entry.find(":")) if i >= 0), default=-1)
    if split <= 0:
        raise ConfigError(f"{where}: {entry!r} is not key=value")
    out[entry[:split].strip()] = entry[split + 1 :].strip()


def load_raw(source: str | Path | Mapping[str, Any]) -> dict[str, str]:
    """Flat string keys from a dict, or from a file chosen by its suffix."""
    if isinstance(source, Mapping):
        out: dict[str, str] = {}
        _flatten(source, "", out, "config")
        return out
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"job config file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".properties":
        return parse_properties(text, str(path))
    if path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path} is not valid YAML: {e}") from e
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path} must hold a mapping of config keys")
        out = {}
        _flatten(data, "", out, str(path))
        return out
    raise ConfigError(f"{path}: a job config is a .properties, .yaml or .yml file")
