"""The refusal of a store whose checkpoint holds a changelog position its config no longer backs up: its
advice can be followed (set the changelog back, or give the state up with `samsa checkpoint
forget-store`) rather than sending the user from one refusal to the other."""

from __future__ import annotations

import pytest

from samsa.exceptions import InvalidConfigError
from samsa.stores.backends import store_backends
from samsa.stores.changelog.marker import ChangelogMarker
from samsa.stores.exceptions import RestoreSourceError, StoreConfigError
from samsa.stores.factory import StoreSpec
from samsa.streams import SystemStreamPartition

MARKERS = {
    "changelog": {"counts": ChangelogMarker(SystemStreamPartition("kafka", "counts-cl", 2), 41).encode()}
}
FORGET = "`samsa checkpoint forget-store <job config> --store counts`"


def test_a_removed_changelog_is_refused_naming_the_topic_to_set_back_and_forget_store() -> None:
    backends = store_backends({}, StoreSpec("counts", "rocksdb"))
    with pytest.raises(RestoreSourceError) as refused:
        backends.restore_from("counts", MARKERS, "Partition 2")
    message = str(refused.value)
    assert isinstance(refused.value, InvalidConfigError)
    assert "store 'counts' of task 'Partition 2'" in message, message
    assert "stores.counts.changelog is not set (it was kafka.counts-cl)" in message, message
    assert "set stores.counts.changelog=kafka.counts-cl back" in message, message
    assert FORGET in message and "stores.counts.changelog=kafka.counts-cl" in message, message
    # Advice the config cannot take without the changelog key leads in a circle: not given.
    assert "restore.factories" not in message and "backup.factories" not in message, message
    assert refused.value.checkpointed_changelog == "kafka.counts-cl"


def test_the_changelog_dropped_from_the_backups_only_names_the_factories_and_forget_store() -> None:
    spec = StoreSpec("counts", "rocksdb", changelog="kafka.counts-cl")
    backends = store_backends({"stores.counts.backup.factories": "blobstore"}, spec)
    with pytest.raises(RestoreSourceError) as refused:
        backends.restore_from("counts", MARKERS, "Partition 2")
    message = str(refused.value)
    assert "stores.counts.restore.factories=changelog,blobstore" in message, message
    assert FORGET in message, message


def test_backing_up_to_a_changelog_the_store_lacks_names_forget_store_for_a_checkpointed_store() -> None:
    with pytest.raises(StoreConfigError) as refused:
        store_backends({"stores.counts.backup.factories": "changelog"}, StoreSpec("counts", "rocksdb"))
    message = str(refused.value)
    assert "stores.counts.backup.factories= (empty" in message, message
    assert FORGET in message, message


def test_a_changelog_removed_for_another_backend_names_the_factories_to_set_with_it() -> None:
    config = {"stores.counts.backup.factories": "blobstore"}
    backends = store_backends(config, StoreSpec("counts", "rocksdb"))
    with pytest.raises(RestoreSourceError) as refused:
        backends.restore_from("counts", MARKERS, "Partition 2")
    message = str(refused.value)
    assert "set stores.counts.changelog=kafka.counts-cl back, with " in message, message
    assert "stores.counts.restore.factories=changelog,blobstore and changelog in " in message, message
    assert FORGET in message, message
