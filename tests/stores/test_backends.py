"""Backend selection per store: Samza's precedence, the subset rule, the first factory with a marker."""

from __future__ import annotations

import pytest

from samsa.exceptions import InvalidConfigError
from samsa.stores.backends import StoreBackends, store_backends
from samsa.stores.exceptions import RestoreSourceError, StoreConfigError
from samsa.stores.factory import StoreSpec

LOGGED = StoreSpec("s", "rocksdb", changelog="kafka.s-log")
PLAIN = StoreSpec("s", "rocksdb")


def test_a_store_with_a_changelog_is_backed_by_it_by_default() -> None:
    assert store_backends({}, LOGGED) == StoreBackends(("changelog",), ("changelog",))
    assert store_backends({}, PLAIN) == StoreBackends((), ())
    assert not store_backends({}, PLAIN).durable


def test_store_keys_win_over_job_keys_even_when_empty() -> None:
    config = {"stores.backup.factories": "changelog", "stores.s.backup.factories": ""}
    assert store_backends(config, LOGGED) == StoreBackends((), ())


def test_the_seed_name_is_an_alias_and_samza_class_names_are_accepted() -> None:
    config = {"task.backup.factories": "org.apache.samza.storage.KafkaChangelogStateBackendFactory"}
    assert store_backends(config, LOGGED).backup == ("changelog",)


def test_restore_factories_must_be_backup_factories() -> None:
    with pytest.raises(StoreConfigError, match=r"stores\.s\.restore\.factories"):
        store_backends({"stores.s.backup.factories": "", "stores.s.restore.factories": "changelog"}, LOGGED)


def test_changelog_backup_needs_a_changelog() -> None:
    with pytest.raises(StoreConfigError, match=r"stores\.s\.changelog"):
        store_backends({"stores.backup.factories": "changelog"}, PLAIN)


def test_unknown_backends_are_named() -> None:
    with pytest.raises(StoreConfigError, match="unknown state backend 'hdfs'") as info:
        store_backends({"stores.backup.factories": "hdfs"}, LOGGED)
    assert "stores.backup.factories" in str(info.value)


def test_dual_backup_and_migration_steps() -> None:
    dual = {"stores.backup.factories": "changelog,blobstore"}
    assert store_backends(dual, LOGGED) == StoreBackends(
        ("changelog", "blobstore"), ("changelog", "blobstore")
    )
    blob_first = {**dual, "stores.restore.factories": "blobstore,changelog"}
    assert store_backends(blob_first, LOGGED).restore == ("blobstore", "changelog")
    samza_class = {
        "stores.backup.factories": "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory"
    }
    assert store_backends(samza_class, PLAIN) == StoreBackends(("blobstore",), ("blobstore",))


def test_the_blob_store_backs_up_rocksdb_stores_only() -> None:
    in_memory = StoreSpec("s", "inmemory", changelog="kafka.s-log")
    with pytest.raises(
        StoreConfigError, match=r"RocksDB stores only.*stores\.s\.backup\.factories=changelog"
    ):
        store_backends({"stores.backup.factories": "blobstore"}, in_memory)


def test_restore_uses_the_first_factory_with_a_marker() -> None:
    backends = StoreBackends(("changelog", "other"), ("other", "changelog"))
    assert backends.restore_from("s", {"changelog": {"s": "m"}}) == "changelog"
    assert backends.restore_from("s", {"other": {"s": "m"}, "changelog": {"s": "m"}}) == "other"
    assert backends.restore_from("s", None) == "other"
    assert StoreBackends((), ()).restore_from("s", None) is None


def test_a_checkpoint_whose_markers_no_restore_factory_has_is_refused_naming_store_and_key() -> None:
    # Blob-only for a while, then back to dual backup restoring from the changelog: the checkpoint has a
    # blob-store marker only, and the changelog holds none of the writes since.
    backends = StoreBackends(("changelog", "blobstore"), ("changelog",))
    with pytest.raises(RestoreSourceError) as refused:
        backends.restore_from("counts", {"blobstore": {"counts": "index"}, "changelog": {}}, "Partition 3")
    message = str(refused.value)
    assert "store 'counts' of task 'Partition 3'" in message
    assert "from blobstore only" in message and "restores from changelog" in message
    assert "stores.counts.restore.factories=blobstore,changelog" in message
    # A config change mends it, a restart does not: a container exits with the config-error status.
    assert isinstance(refused.value, InvalidConfigError)


def test_no_marker_for_the_store_anywhere_restores_from_the_first_factory() -> None:
    backends = StoreBackends(("changelog", "blobstore"), ("changelog", "blobstore"))
    # A store new to an existing checkpoint, or no checkpoint at all: nothing to lose.
    assert backends.restore_from("new", {"blobstore": {"counts": "index"}}) == "changelog"
    assert backends.restore_from("new", {}) == "changelog"
    # A checkpoint without a changelog marker restores from the backend that has one.
    assert backends.restore_from("counts", {"blobstore": {"counts": "index"}}) == "blobstore"


def test_a_job_wide_restore_list_leaves_stores_without_backup_alone() -> None:
    config = {"stores.restore.factories": "changelog"}
    assert store_backends(config, PLAIN) == StoreBackends((), ())
    assert store_backends(config, LOGGED) == StoreBackends(("changelog",), ("changelog",))


def test_a_backed_up_store_needs_a_restore_factory() -> None:
    with pytest.raises(StoreConfigError, match=r"stores\.s\.restore\.factories.*needs a restore factory"):
        store_backends({"stores.s.restore.factories": ""}, LOGGED)


def test_a_blob_backed_in_memory_store_is_told_both_ways_on() -> None:
    scratch = StoreSpec("scratch", "inmemory")
    with pytest.raises(StoreConfigError) as info:
        store_backends({"stores.backup.factories": "blobstore"}, scratch)
    message = str(info.value)
    assert message.startswith("stores.backup.factories: "), message
    assert 'stores.scratch.backup.factories= (empty; in YAML: stores.scratch.backup.factories: "")' in message
    assert (
        "stores.scratch.backup.factories=changelog and stores.scratch.changelog=<system>.<stream>" in message
    )
    # A store that has its changelog already needs the backup key only.
    logged = StoreSpec("scratch", "inmemory", changelog="kafka.c")
    with pytest.raises(StoreConfigError) as info:
        store_backends({"stores.backup.factories": "blobstore"}, logged)
    assert "stores.scratch.changelog=<system>" not in str(info.value)
    assert "stores.scratch.backup.factories=changelog" in str(info.value)


def test_a_changelog_backup_without_a_changelog_is_told_both_ways_on() -> None:
    with pytest.raises(StoreConfigError) as info:
        store_backends({"stores.backup.factories": "changelog"}, PLAIN)
    message = str(info.value)
    assert "set stores.s.changelog=<system>.<stream>" in message
    assert "stores.s.backup.factories= (empty" in message
