"""The adjunct store manager: `stores.adstore.manager.factory`, built in or the user's, in a container."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import systems_fixtures
from adjunct_jobs import enrich_job
from adjunct_test_managers import UpperNameManagerFactory
from job_fixtures import job_config, produce, read_topic, run_job

from samsa.adjunct.exceptions import AdjunctConfigError
from samsa.adjunct.manager import MANAGER_FACTORY_KEY, BuiltinManagerFactory, manager_factory
from samsa.adjunct.writer import AdjunctWriter
from samsa.runtime.config.config import Config
from samsa.runtime.exceptions import ConfigError

__all__ = ["job_config", "produce", "read_topic", "run_job"]

# The container tests run on Kafka and on the in-memory system.
kafka_bootstrap = systems_fixtures.kafka_bootstrap
kafka_admin = systems_fixtures.kafka_admin


def _customers(produce, customers: str) -> None:
    for cid in (1, 2, 3):
        after = {"id": cid, "name": f"c{cid}"}
        payload = {"before": None, "after": after, "op": "c"}
        produce(customers, [(json.dumps({"id": cid}), json.dumps(payload))], partition=cid % 2)


def _enriched(read_topic, out: str) -> dict[str, str]:
    return dict(v.decode().split(":") for _, _, _, v in read_topic(out))


def test_the_key_defaults_to_the_built_in_manager() -> None:
    assert Config({}).value(MANAGER_FACTORY_KEY) == "builtin"
    assert isinstance(manager_factory("builtin"), BuiltinManagerFactory)
    assert isinstance(manager_factory(None), BuiltinManagerFactory)


def test_the_built_in_factory_makes_an_adjunct_writer() -> None:
    from samsa.adjunct.extractors import EnvelopeExtractor
    from samsa.runtime.metrics import Counter
    from samsa.stores.memory import InMemoryStore

    made = BuiltinManagerFactory()(
        "s", "Partition 0", InMemoryStore(), EnvelopeExtractor(), Counter({}), None, None
    )
    assert isinstance(made, AdjunctWriter) and made.plain


def test_a_user_factory_writes_the_store_in_a_real_container(
    job_config, topics, produce, read_topic, run_job
):
    orders, customers, out = topics(2), topics(2), topics(2)
    _customers(produce, customers)
    for cid in (1, 2, 3, 4):
        produce(orders, [(str(cid), f"o{cid}")], partition=cid % 2)
    UpperNameManagerFactory.calls.clear()
    config = enrich_job(
        job_config,
        orders,
        customers,
        out,
        **{MANAGER_FACTORY_KEY: "adjunct_test_managers:UpperNameManagerFactory"},
    )
    (container,) = run_job(config)
    assert _enriched(read_topic, out) == {"o1": "C1", "o2": "C2", "o3": "C3", "o4": "?"}
    assert sorted(UpperNameManagerFactory.calls) == [
        ("customers", "Partition 0"),
        ("customers", "Partition 1"),
    ]
    stored = container.registry.snapshot()["samsa_adjunct_records_total"]
    assert sum(s["value"] for s in stored) == 3  # the manager's own count, through the counter it was given


def test_a_bad_factory_path_fails_the_container_naming_the_key(job_config, topics, produce, run_job):
    orders, customers, out = topics(1), topics(1), topics(1)
    produce(orders, [("1", "o1")])
    config = enrich_job(
        job_config, orders, customers, out, **{MANAGER_FACTORY_KEY: "adjunct_test_managers:Missing"}
    )
    with pytest.raises(AdjunctConfigError, match=MANAGER_FACTORY_KEY) as failure:
        run_job(config)
    assert "has no attribute 'Missing'" in str(failure.value)


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("no_such_module_here:Factory", "cannot import module"),
        ("adjunct_test_managers:not_a_factory", "is a int"),
    ],
)
def test_a_factory_that_cannot_be_loaded_names_the_key(path: str, problem: str) -> None:
    with pytest.raises(AdjunctConfigError, match=problem) as failure:
        manager_factory(path)
    assert str(failure.value).startswith(f"{MANAGER_FACTORY_KEY}: ")


def test_a_factory_whose_manager_lacks_the_api_names_the_key(job_config, topics, produce, run_job):
    orders, customers, out = topics(1), topics(1), topics(1)
    config = enrich_job(
        job_config, orders, customers, out, **{MANAGER_FACTORY_KEY: "adjunct_test_managers:makes_no_manager"}
    )
    with pytest.raises(AdjunctConfigError, match="lacks write, write_pairs, plain") as failure:
        run_job(config)
    assert MANAGER_FACTORY_KEY in str(failure.value)


def test_a_malformed_path_is_refused_at_config_time() -> None:
    with pytest.raises(ConfigError, match=MANAGER_FACTORY_KEY):
        Config({MANAGER_FACTORY_KEY: "not a path"})


def test_the_built_in_writer_writes_nothing_of_a_chunk_holding_a_message_it_cannot_extract() -> None:
    from samsa.adjunct.bounded import END_OF_DATASET
    from samsa.adjunct.exceptions import ExtractionError
    from samsa.runtime.metrics import Counter
    from samsa.runtime.task import IncomingMessageEnvelope
    from samsa.stores.memory import InMemoryStore

    class Extractor:
        def extract(self, envelope: IncomingMessageEnvelope):  # type: ignore[no-untyped-def]
            if envelope.value == b"bad":
                raise ExtractionError(envelope, "not a row")
            yield envelope.key, envelope.value  # lazy: its error surfaces only when iterated

    class Seals:
        offset = -1
        sealed: list[int] = []

        def seal(self, next_offset: int, mark: object = None) -> int:
            self.sealed.append(next_offset)
            return len(self.sealed)

        def skips(self, offset: int) -> bool:
            return False

    def env(
        offset: int, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> IncomingMessageEnvelope:
        return IncomingMessageEnvelope("kafka", "ds", 0, offset, b"k%d" % offset, value, 0, headers)

    store, seals = InMemoryStore(), Seals()
    writer = AdjunctWriter("s", "Partition 0", store, Extractor(), Counter({}), None, seals)  # type: ignore[arg-type]
    chunk = [env(0, b"a"), env(1, b"", [(END_OF_DATASET, b"")]), env(2, b"bad"), env(3, b"b")]
    with pytest.raises(ExtractionError) as caught:
        writer.write(chunk)
    assert caught.value.offset == 2
    assert (list(store.all()), seals.sealed) == ([], []), "nothing written, nothing sealed: a retry is safe"
    writer.write(chunk[:2])  # what the run loop does next: the messages before it, then the rest
    writer.write(chunk[3:])
    assert (sorted(store.all()), seals.sealed) == ([(b"k0", b"a"), (b"k3", b"b")], [2])


def test_the_docs_custom_manager_example_runs_as_written(
    job_config, topics, produce, read_topic, run_job, monkeypatch
):
    import re
    import types

    docs = (Path(__file__).resolve().parents[2] / "docs" / "adjunct.md").read_text()
    section = docs.split("**A custom manager.**", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/adjunct.md: the custom manager's code block"
    module = types.ModuleType("docs_adjunct_manager")
    exec(code.group(1), module.__dict__)
    monkeypatch.setitem(sys.modules, "docs_adjunct_manager", module)
    orders, customers, out = topics(2), topics(2), topics(2)
    _customers(produce, customers)
    for cid in (1, 2, 3, 4):
        produce(orders, [(str(cid), f"o{cid}")], partition=cid % 2)
    config = enrich_job(
        job_config, orders, customers, out, **{MANAGER_FACTORY_KEY: "docs_adjunct_manager:MyManagerFactory"}
    )
    (container,) = run_job(config)
    assert _enriched(read_topic, out) == {"o1": "c1", "o2": "c2", "o3": "c3", "o4": "?"}
    stored = container.registry.snapshot()["samsa_adjunct_records_total"]
    assert sum(s["value"] for s in stored) == 3
