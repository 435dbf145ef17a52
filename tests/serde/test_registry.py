"""SerdeRegistry: names from config to serdes, and the errors that name the key at fault."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from samsa.serde import BUILTIN_SERDES, SERDE_CONFIG_KEYS, Serde, SerdeConfigError, SerdeRegistry
from samsa.serde.avro import AvroSerde, ConfluentAvroSerde
from samsa.serde.builtin import BytesSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde
from samsa.serde.testing import FakeSchemaRegistry

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
P = "serializers.registry."

FACTORIES = '''
class Upper:
    """A Serde class with a no-argument constructor."""
    def to_bytes(self, obj):
        return obj.upper().encode()
    def from_bytes(self, data):
        return data.decode()

class Prefixed:
    """A Serde class built from (name, options)."""
    def __init__(self, name, options):
        self.prefix = (name + options.get("sep", ":")).encode()
    def to_bytes(self, obj):
        return self.prefix + obj
    def from_bytes(self, data):
        return data[len(self.prefix):]

def make(name, options):
    return Prefixed(name, {"sep": options["sep"]})

def not_a_serde(name, options):
    return "text"

NOT_CALLABLE = 1

def broken(name, options):
    raise RuntimeError("boom")

class Holder:
    Inner = Upper

from samsa.serde import Serde

class SubUpper(Serde):
    """A subclass of the Serde Protocol keeping the default no-argument constructor."""
    def to_bytes(self, obj):
        return obj.upper().encode()
    def from_bytes(self, data):
        return data.decode()

class SubPrefixed(Serde):
    """A subclass of the Serde Protocol built from (name, options)."""
    def __init__(self, name, options):
        self.prefix = (name + options.get("sep", ":")).encode()
    def to_bytes(self, obj):
        return self.prefix + obj
    def from_bytes(self, data):
        return data[len(self.prefix):]

class SubSubUpper(SubUpper):
    pass

class Wrapped:
    """A Serde class whose constructor's arguments all have defaults."""
    def __init__(self, left="<", right=">"):
        self.left, self.right = left, right
    def to_bytes(self, obj):
        return f"{self.left}{obj}{self.right}".encode()
    def from_bytes(self, data):
        return data.decode()

def make_optional(name, options=None):
    return Prefixed(name, options or {})
'''


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "serde_factories_for_test.py").write_text(textwrap.dedent(FACTORIES))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "serde_factories_for_test"


def test_builtins_need_no_config() -> None:
    registry = SerdeRegistry({})
    kinds = {"bytes": BytesSerde, "string": StringSerde, "json": JsonSerde, "integer": IntegerSerde}
    for name, kind in {**kinds, "long": LongSerde}.items():
        assert isinstance(registry.get(name), kind)
        assert registry.get(name, "topic", is_key=True) is registry.get(name)
    assert registry.names == sorted(BUILTIN_SERDES)


def test_unknown_name_lists_the_known_ones() -> None:
    registry = SerdeRegistry({f"{P}mine.class": "json"})
    with pytest.raises(SerdeConfigError, match=r"unknown serde 'nope': known serdes are avro, bytes, .*mine"):
        registry.get("nope")


def test_aliases_and_samza_factory_names() -> None:
    registry = SerdeRegistry(
        {
            f"{P}latin.class": "string",
            f"{P}latin.encoding": "latin-1",
            f"{P}samza-json.class": "org.apache.samza.serializers.JsonSerdeFactory",
            f"{P}samza-long.class": "org.apache.samza.serializers.LongSerdeFactory",
            f"{P}json.class": "json",  # naming a built-in as itself is harmless
            f"{P}string.encoding": "utf-16-be",  # built-in names take options without a class
            "unrelated.key": "ignored",
        }
    )
    assert registry.get("json").to_bytes({"a": 1}) == b'{"a":1}'
    assert registry.get("string").to_bytes("A") == b"\x00A"
    assert registry.get("latin").to_bytes("é") == b"\xe9"
    assert registry.get("samza-json").to_bytes([1]) == b"[1]"
    assert registry.get("samza-long").to_bytes(1) == b"\x00" * 7 + b"\x01"


def test_factory_paths(factories: str) -> None:
    registry = SerdeRegistry(
        {
            f"{P}upper.class": f"{factories}:Upper",
            f"{P}dotted.class": f"{factories}.Upper",
            f"{P}nested.class": f"{factories}:Holder.Inner",
            f"{P}pre.class": f"{factories}:Prefixed",
            f"{P}made.class": f"{factories}:make",
            f"{P}made.sep": "|",
            f"{P}json.class": f"{factories}:Upper",  # a config may replace a built-in
        }
    )
    for name in ("upper", "dotted", "nested", "json"):
        assert registry.get(name).to_bytes("abc") == b"ABC"
    assert registry.get("pre").to_bytes(b"x") == b"pre:x"
    assert registry.get("made").to_bytes(b"x") == b"made|x"
    assert isinstance(registry.get("made"), Serde)


def test_serde_protocol_subclasses_are_built_by_their_own_constructor(factories: str) -> None:
    # The Protocol's placeholder __init__ takes (*args, **kwargs): it must not make a no-argument class
    # look like a (name, options) factory.
    registry = SerdeRegistry(
        {
            f"{P}up.class": f"{factories}:SubUpper",
            f"{P}upup.class": f"{factories}:SubSubUpper",
            f"{P}pre.class": f"{factories}:SubPrefixed",
            f"{P}pre.sep": "|",
        }
    )
    assert registry.get("up").to_bytes("abc") == b"ABC"
    assert registry.get("upup").to_bytes("abc") == b"ABC"
    assert registry.get("pre").to_bytes(b"x") == b"pre|x"


def test_a_factory_that_can_be_called_without_arguments_keeps_its_defaults(factories: str) -> None:
    # Given (name, options) only when it cannot be built without them: a serde class whose constructor
    # takes two optional arguments would otherwise get the serde's name and options in their places.
    registry = SerdeRegistry(
        {
            f"{P}wrap.class": f"{factories}:Wrapped",
            f"{P}opt.class": f"{factories}:make_optional",  # needs `name`: given both
            f"{P}opt.sep": "|",
        }
    )
    assert registry.get("wrap").to_bytes("x") == b"<x>"
    assert registry.get("opt").to_bytes(b"x") == b"opt|x"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nodots", r"serializers\.registry\.x\.class='nodots': expected a built-in serde"),
        ("no_such_module_xyz:F", "cannot import module 'no_such_module_xyz'"),
        ("{m}:Missing", "has no 'Missing'"),
        ("{m}:not_a_serde", "returned str, which lacks to_bytes/from_bytes"),
        ("{m}:broken", r"the factory failed: RuntimeError\('boom'\)"),
        ("{m}:NOT_CALLABLE", "is not callable"),
    ],
)
def test_bad_factory_paths_name_the_key(factories: str, value: str, message: str) -> None:
    with pytest.raises(SerdeConfigError, match=message) as info:
        SerdeRegistry({f"{P}x.class": value.format(m=factories)})
    assert f"{P}x.class" in str(info.value)


def test_broken_factory_keeps_the_cause(factories: str) -> None:
    with pytest.raises(SerdeConfigError) as info:
        SerdeRegistry({f"{P}x.class": f"{factories}:broken"})
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({f"{P}s.class": "string", f"{P}s.colour": "red"}, r"s\.colour: the string serde has no such"),
        ({f"{P}b.class": "bytes", f"{P}b.encoding": "x"}, r"b\.encoding: the bytes serde has no such"),
        ({f"{P}s.class": "string", f"{P}s.encoding": "klingon"}, r"registry\.s\.encoding='klingon': unknown"),
        ({f"{P}mine.schema": SCHEMA}, r"mine\.schema is set but serializers\.registry\.mine\.class"),
        ({f"{P}lonely": "json"}, r"serializers\.registry\.lonely: malformed"),
        ({f"{P}a.class": "avro"}, r"avro serde 'a' needs a schema"),
        ({f"{P}a.class": "avro", f"{P}a.schema": "{"}, r"registry\.a\.schema: not a valid Avro schema"),
    ],
)
def test_config_errors_fail_at_build_naming_the_key(config: dict[str, str], message: str) -> None:
    with pytest.raises(SerdeConfigError, match=message):
        SerdeRegistry(config)


def test_unconfigured_avro_fails_on_get_naming_the_keys() -> None:
    registry = SerdeRegistry({})
    with pytest.raises(SerdeConfigError, match=r"set serializers\.registry\.avro\.schema"):
        registry.get("avro", "t")


def test_avro_schemaless_from_config() -> None:
    registry = SerdeRegistry({f"{P}avro.schema": SCHEMA, f"{P}rec.class": "avro", f"{P}rec.schema": SCHEMA})
    for name in ("avro", "rec"):
        serde = registry.get(name, "t")
        assert isinstance(serde, AvroSerde)
        assert serde.to_bytes({"a": 1}) == b"\x02"


def test_avro_confluent_subjects_and_shared_client(fake_registry: FakeSchemaRegistry) -> None:
    options = {"schema": SCHEMA, "schema.registry.url": fake_registry.url}
    config = {f"{P}{n}.{k}": v for n in ("one", "two") for k, v in options.items()}
    registry = SerdeRegistry({**config, f"{P}one.class": "avro", f"{P}two.class": "avro"})
    value, key = registry.get("one", "orders"), registry.get("one", "orders", is_key=True)
    assert isinstance(value, ConfluentAvroSerde) and value is not key
    assert registry.get("one", "orders") is value
    assert value.to_bytes({"a": 1}) == b"\x00\x00\x00\x00\x01\x02"
    assert key.to_bytes({"a": 1})[:5] == b"\x00\x00\x00\x00\x01"
    registry.get("two", "orders").to_bytes({"a": 2})  # same registry client: cached, no request
    assert fake_registry.requests == [
        ("POST", "/subjects/orders-value/versions"),
        ("POST", "/subjects/orders-key/versions"),
    ]


def test_config_keys_document_every_option() -> None:
    for option in ("class", "encoding", "schema", "schema.file", "reader.schema", "reader.schema.file"):
        assert SERDE_CONFIG_KEYS[f"{P}<name>.{option}"]
    for option in ("schema.registry.url", "basic.auth.user.info", "auto.register.schemas"):
        assert SERDE_CONFIG_KEYS[f"{P}<name>.{option}"]
    assert all(isinstance(doc, str) and "\n" not in doc for doc in SERDE_CONFIG_KEYS.values())


def test_fastavro_is_imported_only_when_avro_is_used() -> None:
    code = (
        "import sys; from samsa.serde import SerdeRegistry; r = SerdeRegistry({}); r.get('json')\n"
        "assert 'fastavro' not in sys.modules, 'fastavro imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
