"""A versioned adjunct store (a bounded dataset) is rebuilt from its stream when what turns its records into
rows changed since its versions were built (its extractor, serdes, source partition), as a non-versioned
store is: its sealed version would otherwise keep being served in the old form."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from adjunct_jobs import rows_enrich_job
from job_fixtures import job_config, produce, read_topic, run_in_process

from samsa.adjunct import versioned
from samsa.adjunct.bounded import END_OF_DATASET
from samsa.adjunct.versioned import POINTER_FILE, VersionedStore, built_with, drop_versions
from samsa.kafka import KafkaProducer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.stores.checkpoint_dirs import read_checked_json, write_checked_json
from samsa.stores.exceptions import StoreError
from samsa.stores.rocksdb import RocksDbStore

__all__ = ["job_config", "produce", "read_topic"]

EXTRACTOR = "stores.customers.adstore.key.value.extractor.factory"
UPPER = "adjunct_test_extractors:UpperNameRecordExtractor"


def _job(job_config: Callable[..., dict[str, str]], orders: str, customers: str, out: str) -> dict[str, str]:
    """The enrichment job, its versioned store `customers` fed by `customers` (extractor A: rows as they
    are)."""
    return rows_enrich_job(
        job_config, orders, customers, out, **{"stores.customers.adstore.versioned": "true"}
    )


def _dataset(bootstrap: str, topic: str, names: dict[str, str], seal: bool = True) -> None:
    producer = KafkaProducer({"bootstrap.servers": bootstrap})
    for key, name in names.items():
        producer.send(topic, json.dumps({"name": name}).encode(), key=key.encode())
    if seal:
        producer.send(topic, None, key=b"-", headers=[(END_OF_DATASET, b"")])
    producer.flush()
    producer.close()


def _enriched(read_topic: Any, out: str, prefix: str) -> dict[str, str]:
    values = [v.decode() for _, _, _, v in read_topic(out)]
    return dict(v.split(":") for v in values if v.startswith(prefix))


def _store_root(config: dict[str, str]) -> Path:
    job = JobConfig(Config(config))
    (pointer,) = Path(job.config.value("job.logged.store.base.dir")).rglob(POINTER_FILE)
    return pointer.parent


def _pointer(root: Path) -> dict[str, Any]:
    _, document, _ = read_checked_json(root / POINTER_FILE)
    assert document is not None
    return document


def _versions(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir()}


def test_a_sealed_version_built_with_another_extractor_is_rebuilt_with_the_new_one(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    _dataset(kafka_bootstrap, customers, {"1": "ann", "2": "bob"})  # offsets 0..2, the marker at 2
    _dataset(kafka_bootstrap, customers, {"1": "ann-next"}, seal=False)  # a build in progress at offset 3
    produce(orders, [("1", "a1"), ("2", "a2")])
    a = _job(job_config, orders, customers, out)
    run_in_process(a)
    assert _enriched(read_topic, out, "a") == {"a1": "ann", "a2": "bob"}
    root = _store_root(a)
    assert (_pointer(root)["sealed-version"], _pointer(root)["building-version"]) == (1, 2)
    # Restarted with extractor B (upper-cased names). The old code went on serving version 1, built by
    # A: {"b1": "ann", "b2": "bob"}.
    b = {**a, EXTRACTOR: UPPER}
    produce(orders, [("1", "b1"), ("2", "b2")])
    caplog.set_level("INFO", logger="samsa.runtime.container")
    run_in_process(b)
    assert _enriched(read_topic, out, "b") == {"b1": "ANN", "b2": "BOB"}, caplog.text
    assert f"{EXTRACTOR} changed from unset to '{UPPER}'" in caplog.text
    assert "version 1 and the build in progress dropped" in caplog.text
    # The rebuilt version replaced the old one: the pointer names it with B's settings; the record after
    # its marker is the next build's (read again with B too), not part of it.
    pointer = _pointer(root)
    assert pointer["build-settings"][EXTRACTOR] == UPPER
    assert (pointer["sealed-version"], pointer["next-build-start"]) == (1, 3)
    assert (pointer["building-version"], pointer["building-start"]) == (2, 3)
    assert _versions(root) == {"v1", "v2"}
    # Unchanged settings since: nothing is rebuilt, the sealed version stays.
    caplog.clear()
    produce(orders, [("1", "c1")])
    run_in_process(b)
    assert _enriched(read_topic, out, "c") == {"c1": "ANN"}
    assert "dropped" not in caplog.text and _pointer(root)["sealed-version"] == pointer["sealed-version"]


def test_unchanged_settings_keep_the_sealed_version(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    _dataset(kafka_bootstrap, customers, {"1": "ann"})
    config = _job(job_config, orders, customers, out)
    run_in_process(config)
    root = _store_root(config)
    before = _pointer(root)
    assert before["sealed-version"] == 1 and before["build-settings"]["stores.customers.msg.serde"] == "json"
    produce(orders, [("1", "a1")])
    caplog.set_level("INFO", logger="samsa.runtime.container")
    run_in_process(dict(config))  # the same settings, as another dict
    assert _enriched(read_topic, out, "a") == {"a1": "ann"}
    assert "dropped" not in caplog.text and "records no build settings" not in caplog.text
    assert _pointer(root) == before and _versions(root) == {"v1"}


def test_an_older_samsas_pointer_without_settings_is_read_and_taken_as_current(
    job_config: Any, topics: Any, produce: Any, read_topic: Any, kafka_bootstrap: str, caplog: Any
) -> None:
    orders, customers, out = topics(1), topics(1), topics(1)
    _dataset(kafka_bootstrap, customers, {"1": "ann"})
    config = _job(job_config, orders, customers, out)
    run_in_process(config)
    root = _store_root(config)
    older = {k: v for k, v in _pointer(root).items() if k != "build-settings"}
    write_checked_json(root / POINTER_FILE, older)  # as an older Samsa wrote it
    produce(orders, [("1", "a1")])
    caplog.set_level("INFO", logger="samsa.adjunct")
    run_in_process(config)
    # Served as it is (that Samsa trusted it), warned; the pointer records the settings from now on.
    assert _enriched(read_topic, out, "a") == {"a1": "ann"}
    assert f"its version pointer {root / POINTER_FILE} (an older Samsa's) records no build" in caplog.text
    assert _pointer(root)["sealed-version"] == 1 and _versions(root) == {"v1"}
    assert _pointer(root)["build-settings"]["stores.customers.msg.serde"] == "json"


# The versioned store itself: the settings recorded with its versions, and the drop's switch point.

A = {EXTRACTOR: None, "stores.customers.msg.serde": "json"}
B = {EXTRACTOR: UPPER, "stores.customers.msg.serde": "json"}


class Crash(BaseException):
    """The process dying at an injected step."""


@pytest.fixture
def engines() -> Iterator[Callable[[Path], RocksDbStore]]:
    opened: list[RocksDbStore] = []

    def engine(path: Path) -> RocksDbStore:
        opened.append(RocksDbStore(path, name="customers"))
        return opened[-1]

    yield engine
    for store in opened:
        store.close()


def _built_with_a(root: Path, engines: Callable[[Path], RocksDbStore]) -> None:
    """Version 1 sealed and version 2 half built, both with the settings `A`."""
    store = VersionedStore(root, engines, "customers")
    store.record_build(A)
    store.write([(b"1", b"ann")], offset=0)
    store.seal(next_offset=2)
    store.write([(b"1", b"ann-next")], offset=2)
    store.close()


def _content(store: VersionedStore) -> dict[bytes, bytes]:
    return dict(store.reader().all())


def test_the_pointer_records_the_settings_of_the_sealed_version_and_of_the_build(
    tmp_path: Path, engines: Callable[[Path], RocksDbStore]
) -> None:
    _built_with_a(tmp_path, engines)
    document = json.loads((tmp_path / POINTER_FILE).read_text())
    assert document["build-settings"] == A and document["building-version"] == 2
    built = built_with(tmp_path)
    assert built is not None and (built.sealed, built.building, built.build) == (1, 2, A)
    assert built_with(tmp_path / "none") is None, "no pointer: nothing built"


def test_dropped_versions_are_never_served_again_whatever_step_a_crash_interrupts(
    tmp_path: Path, engines: Callable[[Path], RocksDbStore]
) -> None:
    _built_with_a(tmp_path, engines)
    save = versioned._save_pointer
    # Dying before the pointer's switch leaves it as it was: the next start finds the change again.
    with mock.patch.object(versioned, "_save_pointer", side_effect=Crash), pytest.raises(Crash):
        drop_versions(tmp_path, B)
    built = built_with(tmp_path)
    assert built is not None and (built.sealed, built.build) == (1, A)
    assert _versions(tmp_path) == {"v1", "v2"}
    # Dying after the switch, before the dirs are deleted: no version is served, the stream is read again
    # from its beginning, with B's settings.
    with mock.patch.object(versioned, "_delete_dir", side_effect=Crash), pytest.raises(Crash):
        drop_versions(tmp_path, B)
    assert versioned._save_pointer is save
    store = VersionedStore(tmp_path, engines, "customers")
    assert (store.sealed_version, store.resume_offset, _content(store)) == (None, None, {})
    assert _versions(tmp_path) == set()
    store.record_build(B)
    store.write([(b"1", b"ANN")], offset=0)
    store.seal(next_offset=2)
    assert _content(store) == {b"1": b"ANN"}
    assert json.loads((tmp_path / POINTER_FILE).read_text())["build-settings"] == B
    store.close()


def test_versions_built_with_other_settings_are_never_labelled_with_new_ones(
    tmp_path: Path, engines: Callable[[Path], RocksDbStore]
) -> None:
    _built_with_a(tmp_path, engines)
    store = VersionedStore(tmp_path, engines, "customers")
    with pytest.raises(StoreError, match="built with other settings"):
        store.record_build(B)
    store.record_build(dict(A))  # the same settings: nothing to do
    store.close()


def test_an_older_samsas_pointer_is_read_with_its_settings_unknown(
    tmp_path: Path, engines: Callable[[Path], RocksDbStore]
) -> None:
    _built_with_a(tmp_path, engines)
    _, document, _ = read_checked_json(tmp_path / POINTER_FILE)
    assert document is not None
    del document["build-settings"]
    write_checked_json(tmp_path / POINTER_FILE, document)
    built = built_with(tmp_path)
    assert built is not None and (built.sealed, built.build) == (1, None)
    store = VersionedStore(tmp_path, engines, "customers")
    assert _content(store) == {b"1": b"ann"} and store.resume_offset == 2
    store.record_build(B)  # taken as built with the current settings: recorded from now on
    assert json.loads((tmp_path / POINTER_FILE).read_text())["build-settings"] == B
    store.close()
