"""The registry of known job-config keys: pattern, type, default and a doc line for each."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from samsa.runtime.exceptions import ConfigError

# Placeholder names that may themselves contain dots (Kafka topic names do); all others are one segment.
_DOTTED_PLACEHOLDERS = {"stream"}
_PLACEHOLDER = re.compile(r"<([a-z]+)>")
# A suggestion is offered only this many edits (a swap of two letters is one) from the key: a wider net
# proposes unrelated keys (`samza.fetch.threshold` -> `samza.factory`).
_MAX_TYPO_EDITS = 2


def typo_distance(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap of neighbours) turning `a` into `b`: optimal string alignment."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def _parse_bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise ConfigError(f"{key}={raw!r} is not a boolean: write true or false")


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer: write a whole number such as 60000") from None


def _parse_list(key: str, raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


@dataclass(frozen=True)
class Key:
    """One documented config key or key pattern (placeholders in angle brackets)."""

    pattern: str
    type: str  # "str" | "int" | "bool" | "list" | "enum" | "class" | "path" | "passthrough"
    doc: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    allow_off: bool = False  # -1 turns a timer off
    # What -1 means where it is allowed below the minimum, e.g. "for the broker's default".
    minus_one: str | None = None
    # Keys from CONFIG.md that a later issue builds: set -> rejected with this reason.
    not_yet: str | None = None
    # Samza keys Samsa does not implement: set -> rejected with this reason (what to do instead).
    unsupported: str | None = None
    # The reason of an unsupported key from the key and the whole raw config, where what to do instead
    # depends on the job (the exact key to write); `unsupported` is the general form.
    advice: Callable[[str, Mapping[str, str]], str] | None = field(default=None, compare=False, repr=False)
    # Values of a supported key that a later issue builds, e.g. exactly_once.
    values_not_yet: dict[str, str] = field(default_factory=dict)
    # Values of a supported key that Samsa refuses (a Samza setting it has no way to honour) -> what to do.
    refused_values: dict[str, str] = field(default_factory=dict)
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = re.split(r"(<[a-z]+>)", self.pattern)
        out = []
        for part in parts:
            m = _PLACEHOLDER.fullmatch(part)
            if m:
                out.append("(.+)" if m.group(1) in _DOTTED_PLACEHOLDERS else "([^.]+)")
            elif part.endswith("*"):
                out.append(re.escape(part[:-1]) + ".+")
            else:
                out.append(re.escape(part))
        object.__setattr__(self, "regex", re.compile("".join(out)))

    def filled(self, key: str, text: str) -> str:
        """`text` with this pattern's placeholders (`<sys>`, `<stream>`, ...) replaced by what `key`, a key
        the pattern matches, has in their places; others are left as written."""
        m = self.regex.fullmatch(key)
        if m is None:
            return text
        for name, value in zip(_PLACEHOLDER.findall(self.pattern), m.groups(), strict=True):
            text = text.replace(f"<{name}>", value)
        return text

    @property
    def special_minus_one(self) -> str | None:
        """What -1 means for this int key, when it is allowed outside the range."""
        return "to turn it off" if self.allow_off else self.minus_one

    @property
    def allowed_range(self) -> str:
        """The values an int key takes, in words: 'at least 1', 'between 0 and 65535', '..., or -1 ...'."""
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            text = f"between {low} and {high}"
        elif low is not None:
            text = f"at least {low}"
        elif high is not None:
            text = f"at most {high}"
        else:
            text = "any whole number"
        special = self.special_minus_one
        return text if special is None else f"{text}, or -1 {special}"

    @property
    def is_pattern(self) -> bool:
        return "<" in self.pattern or self.pattern.endswith("*")

    def parse(self, key: str, raw: str, config: Mapping[str, str] | None = None) -> object:
        """Turns a raw string into this key's typed value, or raises naming the key; `config`, the whole raw
        config, lets an unsupported key's advice name the key to write instead."""
        if self.not_yet:
            raise ConfigError(f"{key} is not supported yet ({self.not_yet}); remove it from the job config")
        if self.unsupported:
            instead = self.filled(key, self.unsupported)
            if self.advice is not None and config is not None:
                instead = self.advice(key, config)
            raise ConfigError(
                f"{key} is a Samza key not supported by Samsa: {instead}; remove it from the job config"
            )
        why = self.refused_values.get(raw.strip().lower())
        if why is not None:
            raise ConfigError(f"{key}={raw.strip()} is not supported by Samsa: {why}")
        if self.type == "int":
            value = _parse_int(key, raw)
            low, high = self.minimum, self.maximum
            if ((low is not None and value < low) or (high is not None and value > high)) and not (
                value == -1 and self.special_minus_one is not None
            ):
                raise ConfigError(f"{key}={raw!r} must be {self.allowed_range}")
            return value
        if self.type == "bool":
            return _parse_bool(key, raw)
        if self.type == "list":
            return _parse_list(key, raw)
        if self.type == "enum":
            value_s = raw.strip()
            if value_s in self.values_not_yet:
                raise ConfigError(
                    f"{key}={value_s} is not supported yet ({self.values_not_yet[value_s]}); "
                    f"use one of: {', '.join(c for c in self.choices if c not in self.values_not_yet)}"
                )
            if value_s not in self.choices:
                close = difflib.get_close_matches(value_s, self.choices, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"{key}={raw!r} is not one of {', '.join(self.choices)}{hint}")
            return value_s
        if self.type == "class":
            value_s = raw.strip()
            if self.choices and value_s in self.choices:
                if value_s in self.values_not_yet:
                    raise ConfigError(
                        f"{key}={value_s} is not supported yet ({self.values_not_yet[value_s]})"
                    )
                return value_s
            if not re.fullmatch(r"[A-Za-z_][\w.]*([:.][A-Za-z_]\w*)", value_s):
                allowed = f"one of {', '.join(self.choices)} or " if self.choices else ""
                raise ConfigError(f"{key}={raw!r} must be {allowed}a 'module:Class' or 'module.Class' path")
            return value_s
        return raw.strip() if self.type != "passthrough" else raw


@dataclass(frozen=True)
class OwnKeys:
    """A namespace of keys a custom component reads itself (a store engine, serde or extractor of the
    user's own): an unknown key there passes the check when `selector`, the key naming the component, names
    no built-in one, and sits in none of the namespace's `reserved` sub-namespaces (Samsa's own keys)."""

    namespace: str  # a pattern ending in `*`, e.g. "stores.<s>.*"
    selector: str  # the key picking the component, with the namespace's placeholders: "stores.<s>.factory"
    builtins: frozenset[str]  # the selector's values (any case) that pick a built-in component
    component: str  # what the component is called in messages: "store engine"
    # Sub-namespaces of Samsa's keys, checked under a custom component too ("stores.<s>.adstore.*"): a
    # misspelt Samsa key there (`adstore.max.staleness`) would otherwise be silently ignored.
    reserved: tuple[str, ...] = ()
    pattern: Key = field(init=False, repr=False, compare=False)
    _reserved: tuple[Key, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", Key(self.namespace, "str", self.component))
        object.__setattr__(self, "_reserved", tuple(Key(r, "str", self.component) for r in self.reserved))

    def holds(self, key: str) -> bool:
        """Whether `key` is in this namespace and outside its reserved sub-namespaces."""
        return bool(self.pattern.regex.fullmatch(key)) and self.samsa_part(key) is None

    def samsa_part(self, key: str) -> str | None:
        """The reserved sub-namespace `key` sits in, placeholders filled ("stores.s.adstore.*"), or None."""
        part = next((r for r in self._reserved if r.regex.fullmatch(key)), None)
        return None if part is None else part.filled(key, part.pattern)

    def selector_of(self, key: str) -> str:
        """The selector key of the component `key` (a key of this namespace) belongs to."""
        return self.pattern.filled(key, self.selector)

    def is_custom(self, raw: Mapping[str, str], key: str) -> bool:
        """Whether `raw` picks a custom component for `key`'s namespace (unset picks a built-in one)."""
        chosen = raw.get(self.selector_of(key))
        return chosen is not None and chosen.strip().lower() not in self.builtins


def _fill(pattern: list[str], segments: list[str]) -> str:
    """A pattern with its placeholders taken from `segments` at the same places; a dotted placeholder
    takes every segment between the pattern's fixed head and tail."""
    out = []
    i = 0
    for n, seg in enumerate(pattern):
        m = _PLACEHOLDER.fullmatch(seg)
        if not m:
            out.append(seg.rstrip("*"))
            i += 1
            continue
        width = (
            max(1, len(segments) - (len(pattern) - n - 1) - i) if m.group(1) in _DOTTED_PLACEHOLDERS else 1
        )
        out.append(".".join(segments[i : i + width]) or seg)
        i += width
    return ".".join(s for s in out if s)


class KeyRegistry:
    """Looks keys up by exact name first, then by pattern; suggests close matches for typos."""

    def __init__(
        self, keys: Iterable[Key], prefixes: Iterable[str], own_keys: Iterable[OwnKeys] = ()
    ) -> None:
        self.keys = list(keys)
        self._exact = {k.pattern: k for k in self.keys if not k.is_pattern}
        # Longer patterns first so `systems.<sys>.streams.<stream>.samza.msg.serde` wins over broader ones.
        self._patterns = sorted((k for k in self.keys if k.is_pattern), key=lambda k: -len(k.pattern))
        self.prefixes = tuple(prefixes)
        # The narrowest namespace first: an extractor's keys are its own, not the store engine's.
        self.own_keys = sorted(own_keys, key=lambda o: -len(o.namespace))

    def own_namespace(self, key: str) -> OwnKeys | None:
        """The narrowest namespace of a component's own keys that `key` sits in, or None (also when `key`
        sits in a sub-namespace of Samsa's keys that the namespace reserves: see `samsa_namespace`)."""
        for own in self.own_keys:
            if own.pattern.regex.fullmatch(key):
                return own if own.holds(key) else None
        return None

    def samsa_namespace(self, key: str) -> tuple[str, OwnKeys] | None:
        """The reserved sub-namespace of Samsa's keys (filled: "stores.s.adstore.*") that `key` sits in,
        inside the narrowest namespace of a component's own keys, with that namespace; or None."""
        for own in self.own_keys:
            if own.pattern.regex.fullmatch(key):
                part = own.samsa_part(key)
                return None if part is None else (part, own)
        return None

    def lookup(self, key: str) -> tuple[Key, tuple[str, ...]] | None:
        """The registry entry for `key` and the placeholder values it matched, or None."""
        exact = self._exact.get(key)
        if exact is not None:
            return exact, ()
        for k in self._patterns:
            m = k.regex.fullmatch(key)
            if m:
                return k, m.groups()
        return None

    def governs(self, key: str) -> bool:
        """Whether `key` sits under a prefix Samsa owns (so an unknown key there is a mistake)."""
        return key.startswith(self.prefixes)

    def suggest(self, key: str) -> str | None:
        """The closest known key a typo away, with placeholders filled from `key`'s own segments.

        Only keys under `key`'s own first segment are candidates: a `task.` key is never "corrected" into a
        `stores.` key whose store placeholder took a word of the typo.
        """
        segments = key.split(".")
        candidates = {
            _fill(k.pattern.split("."), segments)
            for k in self.keys
            if not k.unsupported and k.pattern.split(".", 1)[0] == segments[0]
        }
        scored = sorted((typo_distance(key, c), c) for c in candidates if c != key)
        return scored[0][1] if scored and scored[0][0] <= _MAX_TYPO_EDITS else None

    def misspelled_prefix(self, key: str) -> str | None:
        """`key` with its first segment respelled as a governed prefix, when `key` sits under none and the
        respelled key is a known one (`tasks.commit.ms` -> `task.commit.ms`); else None, so a user's own
        keys (`wordcount.output.stream`) stay theirs."""
        head, sep, rest = key.partition(".")
        if not sep or self.governs(key):
            return None
        for prefix in self.prefixes:
            known = prefix.rstrip(".")
            if typo_distance(head.lower(), known) <= _MAX_TYPO_EDITS:
                respelled = f"{known}.{rest}"
                found = self.lookup(respelled)
                if found is not None and not found[0].unsupported:
                    return respelled
        return None

    def render(self, describe: Callable[[Key], str] | None = None) -> str:
        """A table of every key for `samsa config keys`."""
        lines = []
        for k in sorted((k for k in self.keys if not k.unsupported), key=lambda k: k.pattern):
            default = "" if k.default is None else f" [default: {k.default}]"
            kind = k.type if not k.choices else f"{k.type}: {'|'.join(k.choices)}"
            if k.type == "int" and k.minimum is not None:
                kind = f"int: {k.allowed_range}"
            status = f" (not supported yet: {k.not_yet})" if k.not_yet else ""
            lines.append(f"{k.pattern}  <{kind}>{default}{status}\n    {k.doc}")
        for o in sorted(self.own_keys, key=lambda o: o.namespace):
            but = f" Not under {', '.join(o.reserved)}: Samsa's keys, checked as ever." if o.reserved else ""
            lines.append(
                f"{o.namespace}  <str>\n    Keys of a custom {o.component}'s own, when {o.selector} is a "
                "module path (not a built-in name): passed to it unchecked, unless a typo of a Samsa key."
                + but
            )
        return "\n".join(lines)
