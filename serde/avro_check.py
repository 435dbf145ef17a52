"""Checks a record against its Avro writer schema before fastavro writes it.

fastavro's writer coerces what it is given (2.9 into a long writes 2, "false" into a boolean writes true,
2**40 into an int writes bytes Java cannot read) and drops fields the schema does not declare. The
checks here refuse all of that, as Java's Avro does for a value of the wrong class. They are compiled
once per schema: a closure per schema node, and per record a generated function with one line per field
that tests exact types first and hands anything unusual to the closures, which name the problem. A valid
record costs about a quarter of fastavro's write; fastavro's own validator (`fastavro.validation`) costs
three times more, and refuses neither extra fields nor a float that overflows.

Floats: Python has no 32-bit float, so every value written to an Avro `float` is narrowed; rounding is
unavoidable and accepted, but a finite value beyond the float range would be written as infinity.
Java's writer narrows with `Number.floatValue()` too, yet there the value is a `Float` already (a
specific record's field, or `GenericData.validate` refusing a `Double`), so the overflow happens in the
user's own cast. Samsa has no such cast, so it refuses the value; pass `math.inf` to mean infinity, or
use a `double` field.
"""

from __future__ import annotations

import array
import difflib
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
# Doubles below this magnitude round to a finite 32-bit float (at most FLT_MAX); at it, half way between
# FLT_MAX and 2**128, round-half-even gives infinity.
_FLOAT_LIMIT = 2.0**128 - 2.0**103
_MAX_SHOWN = 80  # a value is shown for recognition, not in full
_MISSING = object()


class Problem:
    """Why a value does not fit: built at the failing leaf, its path filled in as the checks unwind."""

    def __init__(self, value: Any, expected: str, detail: str | None = None, *, missing: bool = False):
        self.value = value
        self.expected = expected
        self.detail = detail
        self.missing = missing
        self.path: list[str] = []  # innermost first

    def render(self, root: str) -> str:
        """One line naming the field path, the value and its type, and what the schema expects."""
        where = root + "".join(reversed(self.path))
        if self.missing:
            text = f"{where} is missing and has no default: the schema says {self.expected}"
        elif self.detail is not None and self.value is _MISSING:
            return f"{where} {self.detail}"
        else:
            shown = repr(self.value)
            if len(shown) > _MAX_SHOWN:
                shown = shown[:_MAX_SHOWN] + "..."
            text = f"{where} = {shown} ({type(self.value).__name__}), but the schema says {self.expected}"
        return text if self.detail is None else f"{text}: {self.detail}"


Check = Callable[[Any], Problem | None]


def compile_check(schema: Any, logical_writers: Mapping[str, Callable[[Any, Any], Any]]) -> tuple[Check, str]:
    """The check of parsed writer `schema` (None, or the Problem of a record that does not fit it), and
    the name its problems' paths start with (`problem.render(name)`); `logical_writers`: fastavro's
    converters of logical types to their underlying ones (passed in: fastavro is imported by avro.py only)."""
    named: dict[str, Any] = schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}
    name = _short(schema["name"]) if isinstance(schema, dict) and "name" in schema else "value"
    return _Compiler(named, logical_writers).compile(schema), name


def describe(schema: Any) -> str:
    """A schema in a few words: `long`, `record shop.Order`, `one of null | string`, ..."""
    if isinstance(schema, list):
        return "one of " + " | ".join(describe(branch) for branch in schema)
    if isinstance(schema, str):
        return schema
    kind = schema["type"]
    if "logicalType" in schema:
        return f"{kind} ({schema['logicalType']})"
    if kind in ("record", "error"):
        return f"record {schema['name']}"
    if kind == "enum":
        return f"enum {schema['name']} ({', '.join(schema['symbols'])})"
    if kind == "fixed":
        return f"fixed {schema['name']} ({schema['size']} bytes)"
    if kind == "array":
        return f"array of {describe(schema['items'])}"
    if kind == "map":
        return f"map of {describe(schema['values'])}"
    return describe(kind)


def _short(fullname: str) -> str:
    return fullname.rpartition(".")[2]


class _Compiler:
    """Turns schema nodes into checks; named types compile once (recursive types through a late binding)."""

    def __init__(
        self, named: Mapping[str, Any], logical_writers: Mapping[str, Callable[[Any, Any], Any]]
    ) -> None:
        self._named = named
        self._logical_writers = logical_writers
        self._checks: dict[str, Check] = {}

    def compile(self, schema: Any) -> Check:
        if isinstance(schema, list):
            return self._union(schema)
        if isinstance(schema, str):
            primitive = _PRIMITIVES.get(schema)
            return primitive if primitive is not None else self._by_name(schema)
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None:
            prepare = self._logical_writers.get(f"{kind}-{logical}")
            underlying = {k: v for k, v in schema.items() if k != "logicalType"}
            inner = self.compile(underlying if isinstance(kind, str) and kind in _COMPOUND else kind)
            return inner if prepare is None else _logical(prepare, schema, inner)
        if kind in ("record", "error"):
            return self._named_check(schema["name"], lambda: self._record(schema))
        if kind == "enum":
            return self._named_check(schema["name"], lambda: _enum(schema))
        if kind == "fixed":
            return self._named_check(schema["name"], lambda: _fixed(schema))
        if kind == "array":
            items = schema["items"]
            return _array(self.compile(items), _complete_types(items), describe(schema))
        if kind == "map":
            values = schema["values"]
            return _map(self.compile(values), _complete_types(values), describe(schema))
        return self.compile(kind)

    def _by_name(self, name: str) -> Check:
        schema = self._named[name]
        found = None if "logicalType" in schema else self._checks.get(name)  # cached: the bare type
        return found if found is not None else self.compile(schema)

    def _named_check(self, name: str, build: Callable[[], Check]) -> Check:
        found = self._checks.get(name)
        if found is not None:
            return found
        cell: list[Check] = []
        self._checks[name] = lambda value: cell[0](value)  # a recursive type reaches itself through this
        check = build()
        cell.append(check)
        self._checks[name] = check
        return check

    def _record(self, schema: Mapping[str, Any]) -> Check:
        fullname = schema["name"]
        expected = describe(schema)
        names = frozenset(f["name"] for f in schema["fields"])
        fields = [
            (f["name"], "default" in f, _exact_types(f["type"]), self.compile(f["type"]), describe(f["type"]))
            for f in schema["fields"]
        ]

        def check(value: Any) -> Problem | None:
            if type(value) is not dict and not isinstance(value, Mapping):
                return Problem(value, expected)
            if not value.keys() <= names:
                problem = _extra_fields(value, names, fullname, expected)
                if problem is not None:
                    return problem
            for name, has_default, exact, field_check, field_type in fields:
                field_value = value.get(name, _MISSING)
                if type(field_value) in exact:
                    continue
                if field_value is _MISSING:
                    if has_default:
                        continue
                    # fastavro writes an absent field as null: fine where the type allows null.
                    if field_check(None) is not None:
                        problem = Problem(None, field_type, missing=True)
                        problem.path.append(f".{name}")
                        return problem
                    continue
                problem = field_check(field_value)
                if problem is not None:
                    problem.path.append(f".{name}")
                    return problem
            return None

        return _unrolled(
            schema, [(name, default, exact, c) for name, default, exact, c, _ in fields], names, check
        )

    def _union(self, branches: list[Any]) -> Check:
        checks = [self.compile(branch) for branch in branches]
        by_name = {_branch_name(branch): check for branch, check in zip(branches, checks, strict=True)}
        expected = describe(branches)

        def check(value: Any) -> Problem | None:
            if type(value) is tuple and len(value) == 2 and isinstance(value[0], str):
                # fastavro's tuple notation: (type name, value) picks the branch
                chosen = by_name.get(value[0])
                if chosen is None:
                    return Problem(value, expected, f"{value[0]!r} names no branch of the union")
                return chosen(value[1])
            deeper = []
            for branch_check in checks:
                problem = branch_check(value)
                if problem is None:
                    return None
                if problem.path or problem.value is _MISSING:
                    deeper.append(problem)
            # One branch took the value's shape and failed inside it: its reason is the useful one.
            return deeper[0] if len(deeper) == 1 else Problem(value, expected)

        return check


def _unrolled(
    schema: Mapping[str, Any],
    fields: list[tuple[str, bool, frozenset[type], Check]],
    names: frozenset[str],
    slow: Check,
) -> Check:
    """`slow`'s verdict at a fraction of its cost for a valid dict: one generated function with a line per
    field (a loop over fields costs as much as the checks); anything unusual goes to `slow`, which names
    the problem, or passes what only looked unusual (a field left to its default, a numpy int)."""
    namespace: dict[str, Any] = {"names": names, "M": _MISSING, "slow": slow}
    lines = [
        "def check(value):",
        "    if type(value) is not dict or not value.keys() <= names:",
        "        return slow(value)",
        "    get = value.get",
    ]
    for i, (name, has_default, exact, field_check) in enumerate(fields):
        namespace.update({f"n{i}": name, f"e{i}": exact, f"c{i}": field_check})
        fits = _fits_inline(schema["fields"][i]["type"], i, namespace)
        lines.append(f"    x = get(n{i}, M)")
        lines.append(
            f"    if {'x is not M and ' if has_default else ''}not ({fits}) and c{i}(x) is not None:"
        )
        lines.append("        return slow(value)")
    lines.append("    return None")
    exec(compile("\n".join(lines), f"<avro check of {schema['name']}>", "exec"), namespace)
    check: Check = namespace["check"]
    return check


def _fits_inline(kind: Any, i: int, namespace: dict[str, Any]) -> str:
    """A Python expression true of common values `x` of field `i` that fit `kind` (false: ask its check)."""
    kind = _bare(kind)
    underlying = kind["type"] if isinstance(kind, dict) and "logicalType" in kind else kind
    if underlying in ("int", "long"):  # a logical type over int or long takes its underlying ints as they are
        low, high = INT_RANGE if underlying == "int" else LONG_RANGE
        return f"type(x) is int and {low} <= x <= {high}"
    if kind == "float":
        namespace["FLOAT_LIMIT"] = _FLOAT_LIMIT
        return "type(x) is float and -FLOAT_LIMIT < x < FLOAT_LIMIT"
    if isinstance(kind, dict) and kind["type"] == "enum" and "logicalType" not in kind:
        namespace[f"s{i}"] = frozenset(kind["symbols"])
        return f"type(x) is str and x in s{i}"
    if isinstance(kind, dict) and kind["type"] == "array" and _complete_types(kind["items"]):
        namespace[f"a{i}"] = _complete_types(kind["items"])
        return f"type(x) is list and a{i}.issuperset(map(type, x))"
    return f"type(x) in e{i}"


def _complete_types(schema: Any) -> frozenset[type]:
    """`_exact_types(schema)` where that is all a value can be besides odd cases (a `str` subclass), else
    empty: the fast paths of arrays and maps."""
    schema = _bare(schema)
    if isinstance(schema, str) and schema in _EXACT:
        return _EXACT[schema]
    if isinstance(schema, list) and all(isinstance(branch, str) and branch in _EXACT for branch in schema):
        return _exact_types(schema)
    return frozenset()


def _bare(schema: Any) -> Any:
    """`{"type": "int"}` as `"int"`: a primitive written as an object, without a logical type."""
    if isinstance(schema, dict) and "logicalType" not in schema and schema.get("type") in _PRIMITIVES:
        return schema["type"]
    return schema


def _exact_types(schema: Any) -> frozenset[type]:
    """Python types whose every value fits `schema` (a check would only confirm it): the fast path."""
    schema = _bare(schema)
    if isinstance(schema, list):
        return frozenset().union(*(_exact_types(branch) for branch in schema))
    return _EXACT.get(schema, frozenset()) if isinstance(schema, str) else frozenset()


def _branch_name(branch: Any) -> str:
    """The name fastavro's tuple notation gives a union branch: a type name, or a named type's name."""
    if isinstance(branch, str):
        return branch
    if isinstance(branch, dict) and "name" in branch:
        return str(branch["name"])
    return str(branch["type"]) if isinstance(branch, dict) else ""


def _extra_fields(
    value: Mapping[Any, Any], names: frozenset[str], fullname: str, expected: str
) -> Problem | None:
    """The problem with keys `value` has beyond the record's fields (fastavro would drop them)."""
    extras = [key for key in value if key not in names]
    if extras == ["-type"]:  # fastavro's hint naming the record type, not a field
        if value["-type"] == fullname:
            return None
        return Problem(value["-type"], expected, "'-type' names another record type")
    listed = []
    for key in extras:
        close = difflib.get_close_matches(str(key), names, n=1) if isinstance(key, str) else []
        listed.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    return Problem(
        _MISSING,
        expected,
        f"has fields the schema does not declare: {', '.join(listed)}; declared: {', '.join(sorted(names))}",
    )


def _logical(prepare: Callable[[Any, Any], Any], schema: Any, inner: Check) -> Check:
    expected = describe(schema)

    def check(value: Any) -> Problem | None:
        if inner(value) is None:  # already the underlying type (an int for a timestamp): nothing to convert
            return None
        try:
            prepared = prepare(value, schema)
        except Exception as exc:  # each logical writer raises its own types; all mean "does not fit"
            return Problem(value, expected, f"{type(exc).__name__}: {exc}")
        problem = inner(prepared)
        if problem is None:
            return None
        return Problem(value, expected, f"as {schema['type']} it is {prepared!r}")

    return check


def _integer(kind: str, low: int, high: int) -> Check:
    wider = " (use long)" if kind == "int" else ""

    def check(value: Any) -> Problem | None:
        if type(value) is not int:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                return Problem(value, kind)
            value = int(value)
        if low <= value <= high:
            return None
        return Problem(value, kind, f"outside Avro {kind}'s range {low}..{high}{wider}")

    return check


def _float(value: Any) -> Problem | None:
    if type(value) is not float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return Problem(value, "float")
        try:
            narrowed = float(value)
        except OverflowError:
            return Problem(value, "float", "too large for a float; use double")
    else:
        narrowed = value
    if -_FLOAT_LIMIT < narrowed < _FLOAT_LIMIT or math.isinf(narrowed) or math.isnan(narrowed):
        return None
    return Problem(
        value,
        "float",
        "beyond the 32-bit float range (about ±3.4e38), it would be written as infinity; use a double "
        "field, or pass math.inf to mean infinity",
    )


def _double(value: Any) -> Problem | None:
    if type(value) is float:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return Problem(value, "double")
    try:
        float(value)
    except OverflowError:
        return Problem(value, "double", "too large for a double")
    return None


def _boolean(value: Any) -> Problem | None:
    return None if value is True or value is False else Problem(value, "boolean")


def _string(value: Any) -> Problem | None:
    return None if isinstance(value, str) else Problem(value, "string")


def _bytes(value: Any) -> Problem | None:
    return None if isinstance(value, (bytes, bytearray)) else Problem(value, "bytes")


def _null(value: Any) -> Problem | None:
    return None if value is None else Problem(value, "null")


_PRIMITIVES: dict[str, Check] = {
    "null": _null,
    "boolean": _boolean,
    "int": _integer("int", *INT_RANGE),
    "long": _integer("long", *LONG_RANGE),
    "float": _float,
    "double": _double,
    "string": _string,
    "bytes": _bytes,
}
# Not int, long or float: those need a range check.
_EXACT: dict[str, frozenset[type]] = {
    "null": frozenset({type(None)}),
    "boolean": frozenset({bool}),
    "double": frozenset({float}),
    "string": frozenset({str}),
    "bytes": frozenset({bytes, bytearray}),
}
_STR = frozenset({str})
_COMPOUND = frozenset({"record", "error", "enum", "fixed", "array", "map"})


def _enum(schema: Mapping[str, Any]) -> Check:
    symbols = frozenset(schema["symbols"])
    expected = describe(schema)

    def check(value: Any) -> Problem | None:
        return None if isinstance(value, str) and value in symbols else Problem(value, expected)

    return check


def _fixed(schema: Mapping[str, Any]) -> Check:
    size, expected = schema["size"], describe(schema)

    def check(value: Any) -> Problem | None:
        return None if isinstance(value, bytes) and len(value) == size else Problem(value, expected)

    return check


def _array(items: Check, exact: frozenset[type], expected: str) -> Check:
    def check(value: Any) -> Problem | None:
        if type(value) is list and exact and exact.issuperset(map(type, value)):
            return None  # the common case without a Python-level loop
        if type(value) is not list and (
            isinstance(value, (str, bytes, bytearray)) or not isinstance(value, (Sequence, array.array))
        ):
            return Problem(value, expected)
        for index, item in enumerate(value):
            problem = items(item)
            if problem is not None:
                problem.path.append(f"[{index}]")
                return problem
        return None

    return check


def _map(values: Check, exact: frozenset[type], expected: str) -> Check:
    def check(value: Any) -> Problem | None:
        typed = type(value) is dict and exact and exact.issuperset(map(type, value.values()))
        if typed and _STR.issuperset(map(type, value)):
            return None  # the common case without a Python-level loop
        if type(value) is not dict and not isinstance(value, Mapping):
            return Problem(value, expected)
        for key, item in value.items():
            if not isinstance(key, str):
                return Problem(key, "string", "map keys are strings")
            problem = values(item)
            if problem is not None:
                problem.path.append(f"[{key!r}]")
                return problem
        return None

    return check
