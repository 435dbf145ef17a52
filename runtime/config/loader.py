"""Reads a job config from a .properties file, a YAML file or a dict into flat string keys."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from samsa.runtime.exceptions import ConfigError

log = logging.getLogger(__name__)

#: Samza's environment config rewriter: the one rewriter Samsa runs (Samza's others are Java classes).
ENV_REWRITER = "org.apache.samza.config.EnvironmentConfigRewriter"
ENV_PREFIX = "SAMZA_"


def _flatten(
    data: Mapping[str, Any], prefix: str, out: dict[str, str], source: str, where: dict[str, str]
) -> None:
    """Adds `data`'s keys to `out` under `prefix`; `where` records where each full key was given, so that
    one given twice (repeated in a YAML mapping, or spelled nested and flat) is refused naming both."""
    lines = data.lines if isinstance(data, _LinedDict) else {}
    for key, first, second in data.repeated if isinstance(data, _LinedDict) else ():
        _refuse_twice(source, f"{prefix}{key}", f"line {first}", f"line {second}")
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _flatten(value, f"{full}.", out, source, where)
            continue
        if value is None:
            raise ConfigError(f"{source}: {full} has no value; give one or remove the key")
        here = f"line {lines[key]}" if key in lines else _spelling(prefix, key)
        if full in where:
            _refuse_twice(source, full, where[full], here)
        where[full] = here
        out[full] = _to_text(value)


def _spelling(prefix: str, key: str) -> str:
    """How a dict spelled a key: `task: {commit.ms}` for {"task": {"commit.ms": ...}}."""
    if not prefix:
        return key
    parents = prefix.rstrip(".").split(".")
    return f"{'.'.join(parents)}: {{{key}}}"


def _refuse_twice(source: str, key: str, first: str, second: str) -> None:
    raise ConfigError(
        f"{source}: {key} is given twice ({first} and {second}); keep one: which of the two values was "
        "meant cannot be told"
    )


class _LinedDict(dict[Any, Any]):
    """A YAML mapping with the line of each key, and the keys it repeats (key, first line, second line)."""

    lines: dict[Any, int]
    repeated: list[tuple[Any, int, int]]


class _TextLoader(yaml.SafeLoader):
    """YAML that keeps every scalar as written: `job.id: 007` stays "007", never 7 (or octal 0123 -> 83).

    The key registry types the text (ints, bools, lists), as for a .properties file; only an empty value,
    `~` and `null` still mean "no value", and `<<` still merges an anchored mapping.
    """


_TextLoader.yaml_implicit_resolvers = {
    first: [
        (tag, regex)
        for tag, regex in resolvers
        if tag in ("tag:yaml.org,2002:null", "tag:yaml.org,2002:merge")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _lined_mapping(loader: _TextLoader, node: yaml.MappingNode) -> Iterator[_LinedDict]:
    """A mapping that keeps its keys' lines and the keys it repeats (PyYAML keeps the last silently)."""
    data = _LinedDict()
    yield data  # first, as PyYAML's own constructor does: an alias inside may refer to it
    data.repeated = _repeated_keys(node)
    data.update(loader.construct_mapping(node))
    # After construct_mapping merged `<<` entries in ahead of the mapping's own: its own lines win.
    data.lines = {loader.construct_object(k): k.start_mark.line + 1 for k, _ in node.value}


def _repeated_keys(node: yaml.MappingNode) -> list[tuple[Any, int, int]]:
    """Keys written twice in one mapping, as (key, first line, second line); a `<<` merge's keys are
    meant to be overridden and are not counted."""
    seen: dict[str, int] = {}
    repeated = []
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
            continue
        line = key_node.start_mark.line + 1
        if key_node.value in seen:
            repeated.append((key_node.value, seen[key_node.value], line))
        else:
            seen[key_node.value] = line
    return repeated


_TextLoader.add_constructor("tag:yaml.org,2002:map", _lined_mapping)

# YAML 1.1's booleans: `yes`/`on` in a YAML job file meant true for a boolean key, and still do.
_YAML_BOOLS = {"true": "true", "yes": "true", "on": "true", "false": "false", "no": "false", "off": "false"}


def _yaml_booleans(out: dict[str, str]) -> None:
    """Rewrites YAML 1.1 boolean words to true/false for the keys the registry types as booleans."""
    from samsa.runtime.config.config import default_registry  # it imports this module

    registry = default_registry()
    for key, value in out.items():
        word = _YAML_BOOLS.get(value.strip().lower())
        if word is None:
            continue
        found = registry.lookup(key)
        if found is not None and found[0].type == "bool":
            out[key] = word


def _to_text(value: Any) -> str:
    # A dict's `True` and `60000` are Python values; the registry parses the text form.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_to_text(v) for v in value)
    return str(value)


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parses Java .properties text as `java.util.Properties.load` does: `key=value`, `key: value` or
    `key value`, # and ! comments, \\ continuations, and the escapes `\\uXXXX`, `\\t`, `\\n`, `\\r`,
    `\\f` and `\\<char>` (`\\:`, `\\=`, `\\ `, `\\\\`) in keys and values."""
    out: dict[str, str] = {}
    pending: str | None = None
    first = 0
    # Java ends lines at \n, \r or \r\n only (str.splitlines also splits at \f, \x1c, \u2028...).
    for number, line in enumerate(_LINE_END.split(text), start=1):
        stripped = line.lstrip(_BLANKS)
        if pending is None:
            if not stripped or stripped[0] in "#!":
                continue
            pending, first = "", number
        if _continues(stripped):
            pending += stripped[:-1]
            continue
        entry, pending = pending + stripped, None
        _store_entry(entry, out, f"{source}:{first}")
    if pending is not None:  # a continuation on the last line still ends its entry
        _store_entry(pending, out, f"{source}:{first}")
    return out


_LINE_END = re.compile(r"\r\n|\r|\n")
_BLANKS = " \t\f"  # Java's whitespace between and around keys and values
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes continues the line (an even number are escaped backslashes)."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _store_entry(entry: str, out: dict[str, str], where: str) -> None:
    # The key ends at the first unescaped `=`, `:` or blank; blanks, then one `=` or `:`, then blanks follow.
    end, escaped = len(entry), False
    for i, char in enumerate(entry):
        if not escaped and (char in "=:" or char in _BLANKS):
            end = i
            break
        escaped = char == "\\" and not escaped
    rest = entry[end:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    key = _unescape(entry[:end], where)
    if not key:
        raise ConfigError(f"{where}: {entry!r} has no key; write key=value")
    # Java keeps a value's trailing blanks; an invisible one in a job file is a mistake, so only an
    # escaped one (`\\ `, `\\u0020`) is kept.
    out[key] = _unescape(_strip_unescaped_end(rest), where)


def _strip_unescaped_end(value: str) -> str:
    stripped = value.rstrip(_BLANKS)
    if len(stripped) < len(value) and _continues(stripped):
        return stripped + value[len(stripped)]  # an escaped blank ends the value
    return stripped


def _unescape(text: str, where: str) -> str:
    """Java's escapes: `\\uXXXX`, `\\t` `\\n` `\\r` `\\f`, and `\\` before any other character is dropped."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)  # a lone backslash at the very end stays, as in Java
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigError(
                    f"{where}: malformed \\uXXXX escape {text[i : i + 6]!r}: write four hex digits, "
                    "e.g. \\u0020 for a space"
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPED.get(nxt, nxt))
        i += 2
    return "".join(out)


def load_raw(source: str | Path | Mapping[str, Any]) -> dict[str, str]:
    """Flat string keys from a dict, or from a file chosen by its suffix."""
    if isinstance(source, Mapping):
        out: dict[str, str] = {}
        _flatten(source, "", out, "config", {})
        return out
    path = Path(source)
    text = _read_text(path)
    if path.suffix == ".properties":
        # Java's Properties keeps the last of a key given twice: so does Samsa, for files shared with Samza.
        return parse_properties(text, str(path))
    if path.suffix in (".yaml", ".yml"):
        return _load_yaml(text, path)
    raise ConfigError(f"{path}: a job config is a .properties, .yaml or .yml file")


def _read_text(path: Path) -> str:
    """The text of a job file; a missing, unreadable or non-UTF-8 file, or a directory, fails naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"job config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(
            f"job config file {path} is a directory; name a .properties, .yaml or .yml file"
        ) from None
    except PermissionError:
        # Also when a dir on its path cannot be searched: the file may well exist.
        raise ConfigError(
            f"job config file {path} cannot be read (permission denied); give the user running samsa read "
            "access to it (and search access to its directories)"
        ) from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"job config file {path} is not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8"
        ) from None
    except OSError as e:
        raise ConfigError(f"job config file {path} cannot be read ({e.strerror or e})") from None


def _load_yaml(text: str, path: Path) -> dict[str, str]:
    loader = _TextLoader(text)
    try:
        data = loader.get_single_data() or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from e
    finally:
        loader.dispose()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path} must hold a mapping of config keys")
    out: dict[str, str] = {}
    _flatten(data, "", out, str(path), {})
    _yaml_booleans(out)
    return out


def rewrite(raw: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """`raw` as the rewriters `job.config.rewriters` lists leave it, run in their order, as Samza runs them
    once the whole config is loaded. Samza's environment rewriter is the one Samsa runs: every
    `SAMZA_<KEY>` variable of `environ` sets the key <key> lower-cased with `_` as `.`, over the config's
    own value. Values are never logged: secrets come this way."""
    out = dict(raw)
    names = [n.strip() for n in raw.get("job.config.rewriters", "").split(",") if n.strip()]
    for name in names:
        key = f"job.config.rewriter.{name}.class"
        cls = out.get(key, "").strip()
        if not cls:
            raise ConfigError(
                f"job.config.rewriters names {name!r} but {key} is not set: set it to {ENV_REWRITER}, or "
                f"remove {name} from job.config.rewriters"
            )
        if cls != ENV_REWRITER:
            raise ConfigError(
                f"{key}={cls}: Samsa runs only Samza's environment rewriter ({ENV_REWRITER}), not a Java "
                "class: write the values it would give in the job file, or pass them as SAMZA_<KEY> "
                "environment variables with that rewriter"
            )
        out.update(environment_config(environ))
    return out


def environment_config(environ: Mapping[str, str]) -> dict[str, str]:
    """The keys Samza's EnvironmentConfigRewriter takes from `environ`: `SAMZA_SYSTEMS_KAFKA_CONSUMER_SASL_
    PASSWORD` is `systems.kafka.consumer.sasl.password`."""
    found: dict[str, str] = {}
    for var in sorted(environ):
        if not var.startswith(ENV_PREFIX):
            continue
        if var == ENV_PREFIX:
            raise ConfigError(
                f"environment variable {ENV_PREFIX} names no config key (job.config.rewriters runs "
                f"{ENV_REWRITER}): unset it"
            )
        key = var[len(ENV_PREFIX) :].lower().replace("_", ".")
        found[key] = environ[var]
        log.info("config key %s set from environment variable %s (value not logged)", key, var)
    return found
