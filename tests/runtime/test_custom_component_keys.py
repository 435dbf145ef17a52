"""Keys of a custom component's own (store engine, serde factory, adjunct extractor) pass the config check
and reach the component; under a built-in component they stay unknown keys, as typos of Samsa's keys do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa import IncomingMessageEnvelope, MessageCollector, OutgoingMessage, StreamTask, TaskContext
from samsa.runtime.config.config import Config, default_registry
from samsa.runtime.config.keys import STORE_NAMESPACES
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.task import TaskCoordinator
from samsa.serde.registry import SerdeRegistry
from samsa.testing import TestRunner

ENGINE = "store_factory_engines:RaisingEngine"  # reads its own key `limit` (int), raises without it
SERDE = "own_key_components:PrefixSerde"
EXTRACTOR = "adjunct_test_extractors:FieldExtractor"
EXTRACTOR_KEY = "stores.ref.adstore.key.value.extractor"


@pytest.fixture(autouse=True)
def support_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))


@pytest.mark.parametrize(
    "config",
    [
        {"stores.ref.factory": ENGINE, "stores.ref.limit": "5", "stores.ref.my.setting": "x"},
        {"stores.ref.factory": "my_engines.Dict", "stores.ref.limit": "5"},  # module.Class form
        {"serializers.registry.my.class": SERDE, "serializers.registry.my.prefix": "X-"},
        {
            "stores.ref.factory": "inmemory",
            f"{EXTRACTOR_KEY}.factory": EXTRACTOR,
            f"{EXTRACTOR_KEY}.field": "city",
        },
    ],
)
def test_a_custom_components_own_keys_pass_the_check(config: dict[str, str]) -> None:
    assert dict(Config(config)) == config


@pytest.mark.parametrize(
    ("config", "key", "hint"),
    [
        (
            {"stores.ref.factory": "rocksdb", "stores.ref.limit": "5"},
            "stores.ref.limit",
            "stores.ref.factory",
        ),
        ({"stores.ref.limit": "5"}, "stores.ref.limit", "stores.ref.factory"),  # rocksdb by default
        (
            {"stores.ref.factory": "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory"},
            "stores.ref.my.setting",
            "stores.ref.factory",
        ),
        (
            {"serializers.registry.my.class": "string", "serializers.registry.my.prefix": "X-"},
            "serializers.registry.my.prefix",
            "serializers.registry.my.class",
        ),
        (
            {"stores.ref.factory": "inmemory", f"{EXTRACTOR_KEY}.factory": "debezium"},
            f"{EXTRACTOR_KEY}.field",
            f"{EXTRACTOR_KEY}.factory",
        ),
        # The extractor's keys are its own, not the store engine's: a custom engine takes none of them.
        ({"stores.ref.factory": ENGINE, "stores.ref.limit": "5"}, f"{EXTRACTOR_KEY}.field", "extractor"),
    ],
)
def test_under_a_built_in_component_such_keys_stay_unknown(
    config: dict[str, str], key: str, hint: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Config({**config, key: "city"})
    text = str(raised.value)
    assert f"unknown config key {key!r}" in text and hint in text


@pytest.mark.parametrize(
    ("config", "typo", "meant"),
    [
        ({"stores.ref.factory": ENGINE}, "stores.ref.changelgo", "stores.ref.changelog"),
        (
            {"serializers.registry.my.class": SERDE},
            "serializers.registry.my.clas",
            "serializers.registry.my.class",
        ),
        (
            {"stores.ref.factory": "inmemory", f"{EXTRACTOR_KEY}.factory": EXTRACTOR},
            f"{EXTRACTOR_KEY}.factroy",
            f"{EXTRACTOR_KEY}.factory",
        ),
    ],
)
def test_a_typo_of_a_samsa_key_is_refused_under_a_custom_component_too(
    config: dict[str, str], typo: str, meant: str
) -> None:
    with pytest.raises(ConfigError, match=f"did you mean {meant!r}.*rename it"):
        Config({**config, typo: "kafka.x"})


@pytest.mark.parametrize(
    ("key", "part"),
    [
        ("stores.ref.adstore.max.staleness", "stores.ref.adstore.*"),  # `.ms` left out
        ("stores.ref.adstore.input.stream", "stores.ref.adstore.*"),
        ("stores.ref.rocksdb.compression.type", "stores.ref.rocksdb.*"),
        ("stores.ref.changelog.retention.ms", "stores.ref.changelog.*"),
        ("stores.ref.container.cache.size", "stores.ref.container.*"),
    ],
)
@pytest.mark.parametrize("engine", [ENGINE, "rocksdb", "inmemory"])
def test_samsas_sub_namespaces_of_a_store_stay_checked_under_any_engine(
    engine: str, key: str, part: str
) -> None:
    # A custom engine takes keys of its own under stores.<s>., but not in the namespaces of Samsa's keys:
    # there an unknown key is a misspelt Samsa key, which would silently do nothing.
    with pytest.raises(ConfigError) as raised:
        Config({"stores.ref.factory": engine, key: "10"})
    text = str(raised.value)
    assert f"unknown config key {key!r}" in text and f"{part} keys are Samsa's" in text
    # Not the hint that a custom engine would take it.
    assert "taken only by a custom store engine" not in text


def test_every_sub_namespace_of_samsas_store_keys_is_reserved() -> None:
    # A store key added under a new sub-namespace (stores.<s>.<new>.<key>) must be reserved from custom
    # engines too, or be a multi-word key name (key.serde) rather than a namespace.
    names = {"key", "msg", "object", "write"}  # stores.<s>.key.serde, ...: names, not namespaces
    heads = {
        k.pattern.split(".")[2]
        for k in default_registry().keys
        if k.pattern.startswith("stores.<s>.") and k.pattern.count(".") > 2
    }
    assert heads - names == set(STORE_NAMESPACES)


class Count(StreamTask):
    """Counts each key in store `ref`, and sends the message to `out`."""

    def init(self, context: TaskContext) -> None:
        self.ref: Any = context.store("ref")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        self.ref.put(envelope.key, (self.ref.get(envelope.key) or 0) + 1)
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.message))


class Echo(StreamTask):
    """Sends every message to `out`."""

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=envelope.message))


class Look(StreamTask):
    """Sends what adjunct store `ref` holds under each message's key."""

    def init(self, context: TaskContext) -> None:
        self.ref: Any = context.store("ref")

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        collector.send(OutgoingMessage("kafka", "out", key=envelope.key, value=self.ref.get(envelope.key)))


def test_a_custom_engine_reads_its_own_key_from_the_spec() -> None:
    # RaisingEngine takes int(spec.config["limit"]): without the key it fails to open.
    config = {"stores.ref.factory": ENGINE, "stores.ref.limit": "5", "stores.ref.key.serde": "string"}
    config["stores.ref.msg.serde"] = "json"
    with TestRunner.of(Count).with_config(config) as runner:
        result = runner.add_input("in", [("a", "x"), ("a", "y")]).add_output("out").run()
        assert result.output("out") == ["x", "y"]
        assert result.store("ref") == {"a": 2}


def test_a_custom_serde_factory_is_given_its_own_keys() -> None:
    config = Config({"serializers.registry.my.class": SERDE, "serializers.registry.my.prefix": "X-"})
    assert SerdeRegistry(config).get("my").to_bytes("a") == b"X-a"
    config = {"serializers.registry.my.class": SERDE, "serializers.registry.my.prefix": "X-"}
    config["systems.kafka.streams.out.samza.msg.serde"] = "my"
    with TestRunner.of(Echo).with_config(config) as runner:
        runner.add_input("in", [("a", "x")]).add_output("out")
        assert runner.run().output("out") == ["X-x"]


def test_a_custom_extractor_reads_its_own_key() -> None:
    config = {
        "task.inputs": "kafka.orders",
        "stores.ref.factory": "inmemory",
        "stores.ref.key.serde": "json",
        "stores.ref.msg.serde": "json",
        "stores.ref.adstore.input": "kafka.customers",
        f"{EXTRACTOR_KEY}.factory": EXTRACTOR,
        f"{EXTRACTOR_KEY}.field": "city",
        "systems.kafka.streams.customers.samza.msg.serde": "json",
        "systems.kafka.streams.customers.samza.bootstrap": "true",
        "systems.kafka.streams.orders.samza.key.serde": "json",
    }
    with TestRunner.of(Look).with_config(config) as runner:
        result = (
            runner.add_input("customers", [("k", {"id": 7, "name": "Ada", "city": "Oslo"})])
            .add_input("orders", [(7, "o1")])
            .run()
        )
        assert result.output("out") == ["Oslo"]
        assert result.store("ref") == {7: "Oslo"}


def test_a_custom_extractor_with_an_optional_argument_keeps_its_default_in_a_job() -> None:
    # Its `field="name"` default stands: it takes no keys of its own, so it is called with none.
    config = {
        "task.inputs": "kafka.orders",
        "stores.ref.factory": "inmemory",
        "stores.ref.key.serde": "json",
        "stores.ref.msg.serde": "json",
        "stores.ref.adstore.input": "kafka.customers",
        f"{EXTRACTOR_KEY}.factory": "adjunct_test_extractors:DefaultFieldExtractor",
        "systems.kafka.streams.customers.samza.msg.serde": "json",
        "systems.kafka.streams.customers.samza.bootstrap": "true",
        "systems.kafka.streams.orders.samza.key.serde": "json",
    }
    with TestRunner.of(Look).with_config(config) as runner:
        result = (
            runner.add_input("customers", [("k", {"id": 7, "name": "Ada", "city": "Oslo"})])
            .add_input("orders", [(7, "o1")])
            .run()
        )
        assert result.output("out") == ["Ada"]
