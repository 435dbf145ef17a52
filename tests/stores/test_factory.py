"""Store specs from `stores.<s>.*` config, and opening their engines (built-in and custom classes)."""

from pathlib import Path
from typing import Any

import pytest

from samsa.exceptions import InvalidConfigError
from samsa.stores.api import KeyValueStore
from samsa.stores.exceptions import StoreConfigError, StoreNotFoundError
from samsa.stores.factory import GLOBAL_STORE_KEYS, StoreSpec, check_factory, open_engine, store_specs
from samsa.stores.memory import InMemoryStore
from samsa.stores.rocksdb import RocksDbStore
from samsa.stores.rocksdb_options import RocksDbOptions


class CustomEngine(InMemoryStore):
    """A custom engine class as a user would point `stores.<s>.factory` at."""

    def __init__(self, path: Path, spec: StoreSpec) -> None:
        super().__init__(spec.name)
        self.path = path
        self.spec = spec


class NotAStore:
    def __init__(self, path: Path, spec: StoreSpec) -> None:
        pass


def test_specs_with_defaults_and_all_keys() -> None:
    specs = store_specs(
        {
            "job.name": "wc",
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "json",
            "stores.counts.changelog": "kafka.wc-counts-changelog",
            "stores.counts.rocksdb.compression": "lz4",
            "stores.cache.factory": "inmemory",
            "stores.backup.factories": "changelog",
            "stores.restore.factories": "changelog",
        }
    )
    assert list(specs) == ["cache", "counts"]
    counts = specs["counts"]
    assert counts.factory == "rocksdb"
    assert (counts.key_serde, counts.msg_serde) == ("string", "json")
    assert counts.changelog == "kafka.wc-counts-changelog"
    assert counts.rocksdb == RocksDbOptions(compression="lz4")
    assert counts.config["rocksdb.compression"] == "lz4"
    assert counts.key("factory") == "stores.counts.factory"
    cache = specs["cache"]
    assert (cache.key_serde, cache.msg_serde, cache.changelog, cache.rocksdb) == (
        "bytes",
        "bytes",
        None,
        None,
    )


def test_no_stores() -> None:
    assert store_specs({"job.name": "x", **dict.fromkeys(GLOBAL_STORE_KEYS, "changelog")}) == {}


def test_blank_optional_values_mean_unset() -> None:
    spec = store_specs({"stores.s.factory": "inmemory", "stores.s.changelog": " ", "stores.s.msg.serde": ""})[
        "s"
    ]
    assert spec.changelog is None
    assert spec.msg_serde == "bytes"


@pytest.mark.parametrize(
    ("value", "factory"),
    [
        ("RocksDB", "rocksdb"),
        ("org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory", "rocksdb"),
        ("in-memory", "inmemory"),
        ("org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory", "inmemory"),
        ("my.module:Engine", "my.module:Engine"),
        ("my.module.Engine", "my.module.Engine"),
    ],
)
def test_factory_aliases(value: str, factory: str) -> None:
    assert store_specs({"stores.s.factory": value})["s"].factory == factory


def test_missing_factory_names_the_key() -> None:
    with pytest.raises(StoreConfigError, match=r"^stores\.counts\.factory: missing") as info:
        store_specs({"stores.counts.changelog": "kafka.c"})
    assert info.value.key == "stores.counts.factory"
    assert "stores.counts.changelog" in str(info.value)


def test_unknown_bare_factory_name_is_rejected() -> None:
    with pytest.raises(StoreConfigError, match="unknown factory 'leveldb'"):
        store_specs({"stores.s.factory": "leveldb"})


def test_empty_store_name_is_rejected() -> None:
    with pytest.raises(StoreConfigError, match="empty store name"):
        store_specs({"stores..factory": "rocksdb"})


def test_bad_rocksdb_option_fails_at_parse() -> None:
    with pytest.raises(StoreConfigError, match=r"stores\.s\.rocksdb\.compression"):
        store_specs({"stores.s.factory": "rocksdb", "stores.s.rocksdb.compression": "nope"})


def test_open_rocksdb_engine(tmp_path: Path) -> None:
    spec = store_specs({"stores.counts.factory": "rocksdb"})["counts"]
    with open_engine(spec, tmp_path / "counts") as engine:
        assert isinstance(engine, RocksDbStore)
        assert engine.name == "counts"
        engine.put(b"a", b"1")
    assert (tmp_path / "counts" / "CURRENT").exists()


def test_open_inmemory_engine(tmp_path: Path) -> None:
    spec = store_specs({"stores.c.factory": "inmemory"})["c"]
    engine = open_engine(spec, tmp_path / "unused")
    assert isinstance(engine, InMemoryStore)
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize("sep", [":", "."])
def test_open_custom_engine_class(tmp_path: Path, sep: str) -> None:
    path = f"{__name__}{sep}CustomEngine"
    spec = store_specs({"stores.c.factory": path, "stores.c.custom.knob": "7"})["c"]
    engine = open_engine(spec, tmp_path / "c")
    assert isinstance(engine, CustomEngine)
    assert engine.path == tmp_path / "c"
    assert engine.spec.config["custom.knob"] == "7"


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("no_such_module_xyz:Engine", "cannot import module 'no_such_module_xyz'"),
        (f"{__name__}:Missing", "has no class 'Missing'"),
        (f"{__name__}:NotAStore", "is not a store factory; a store factory is a subclass of"),
        (f"{__name__}:store_specs", "has no class 'store_specs' .it is a function."),
    ],
)
def test_bad_custom_factory_names_the_key(tmp_path: Path, factory: str, message: str) -> None:
    spec = StoreSpec(name="c", factory=factory)
    with pytest.raises(StoreConfigError, match=message) as info:
        open_engine(spec, tmp_path / "c")
    assert info.value.key == "stores.c.factory"


def test_custom_engine_satisfies_the_api_type() -> None:
    assert issubclass(CustomEngine, KeyValueStore)


def test_store_not_found_lists_configured_stores() -> None:
    error = StoreNotFoundError("count", ["words", "counts"])
    assert "'count'" in str(error)
    assert "counts, words" in str(error)
    assert "stores.count.factory" in str(error)
    assert "none" in str(StoreNotFoundError("x", []))


def test_a_store_name_that_looks_like_a_checkpoint_dir_is_refused() -> None:
    from samsa.stores.exceptions import StoreConfigError
    from samsa.stores.factory import store_specs

    with pytest.raises(StoreConfigError, match=r"stores\.x-1-2\.factory.*looks like a checkpoint"):
        store_specs({"stores.x-1-2.factory": "rocksdb"})


class NoArgsEngine(InMemoryStore):
    def __init__(self) -> None:
        super().__init__("x")


class RaisingEngine(InMemoryStore):
    def __init__(self, path: Path, spec: StoreSpec) -> None:
        super().__init__(spec.name)
        self.limit = int(spec.config.get("limit"))  # type: ignore[arg-type]  # None: TypeError


class AbstractEngine(KeyValueStore[bytes, bytes]):
    def __init__(self, path: Path, spec: StoreSpec) -> None:
        pass


class NewReturnsNoStore(InMemoryStore):
    def __new__(cls, path: Path, spec: StoreSpec) -> Any:  # type: ignore[misc]
        return object()


def test_a_class_that_is_no_store_factory_is_refused_before_anything_opens(tmp_path: Path) -> None:
    from samsa.runtime.task import StreamTask

    class Echo(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

    globals()["Echo"] = Echo
    try:
        spec = StoreSpec(name="kv", factory=f"{__name__}:Echo")
        for check in (lambda: check_factory(spec), lambda: open_engine(spec, tmp_path / "kv")):
            with pytest.raises(StoreConfigError) as info:
                check()
            message = str(info.value)
            assert info.value.key == "stores.kv.factory" and isinstance(info.value, InvalidConfigError)
            assert message.startswith(f"stores.kv.factory: {__name__}:Echo ("), message
            assert "a samsa.runtime.task.StreamTask) is not a store factory" in message, message
            assert "subclass of samsa.stores.api.KeyValueStore" in message
            assert "takes (path: pathlib.Path, spec: samsa.stores.factory.StoreSpec)" in message
    finally:
        del globals()["Echo"]
    assert not (tmp_path / "kv").exists()


def test_a_store_whose_constructor_takes_other_arguments_is_refused_by_the_check(tmp_path: Path) -> None:
    spec = StoreSpec(name="kv", factory=f"{__name__}:NoArgsEngine")
    with pytest.raises(StoreConfigError) as info:
        check_factory(spec)
    message = str(info.value)
    expected = "NoArgsEngine() cannot be called as NoArgsEngine(path, spec) (too many positional"
    assert expected in message, message
    assert "test_factory.py:" in message  # where its __init__ is
    with pytest.raises(StoreConfigError, match="cannot be called as NoArgsEngine"):
        open_engine(spec, tmp_path / "kv")


def test_a_constructor_raising_type_error_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    spec = StoreSpec(name="kv", factory=f"{__name__}:RaisingEngine")
    assert check_factory(spec) is RaisingEngine  # the cheap check cannot tell
    with pytest.raises(StoreConfigError) as info:
        open_engine(spec, tmp_path / "kv")
    message = str(info.value)
    assert info.value.key == "stores.kv.factory" and isinstance(info.value, InvalidConfigError)
    assert f"{__name__}:RaisingEngine(path, spec) raised TypeError: int() argument" in message, message
    assert "subclass of samsa.stores.api.KeyValueStore" in message
    assert "(at " in message and "test_factory.py:" in message  # the line that raised
    assert isinstance(info.value.__cause__, TypeError)


def test_an_abstract_store_class_is_refused_naming_what_it_lacks() -> None:
    lacks = "is abstract: it does not implement all, close, flush, get, put, range"
    with pytest.raises(StoreConfigError, match=lacks):
        check_factory(StoreSpec(name="kv", factory=f"{__name__}:AbstractEngine"))


def test_built_in_engines_need_no_check() -> None:
    assert check_factory(StoreSpec(name="kv", factory="rocksdb")) is None
    assert check_factory(StoreSpec(name="kv", factory="inmemory")) is None
    assert check_factory(StoreSpec(name="kv", factory=f"{__name__}:CustomEngine")) is CustomEngine


def test_a_factory_returning_no_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError, match="returned a object, not a store"):
        open_engine(StoreSpec(name="kv", factory=f"{__name__}:NewReturnsNoStore"), tmp_path / "kv")
