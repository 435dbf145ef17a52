"""`check_store_renames`: a task's checkpoint with the blob-store snapshot of a store the job no longer
defines, and none of a store the job restores from the blob store, is refused (a config error, naming the
task, the checkpoint, both stores and the index); a store only removed is warned about."""

from __future__ import annotations

import logging

import pytest

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.stores.blobstore.exceptions import StoreRenamedError
from samsa.stores.blobstore.renamed import check_store_renames

CP0, CP1 = "1795542452386-214973", "1795542452386-214974"
OLD0, OLD1 = "job-1/Partition_0/counts/snapshot-index.a", "job-1/Partition_1/counts/snapshot-index.b"


def test_a_store_renamed_is_refused_naming_the_tasks_checkpoints_stores_and_indexes() -> None:
    checkpoints = {
        "Partition 0": (CP0, {"blobstore": {"counts": OLD0}}),
        "Partition 1": (CP1, {"blobstore": {"counts": OLD1}}),
    }
    with pytest.raises(StoreRenamedError) as refused:
        check_store_renames({"tally"}, ["tally"], checkpoints)
    message = str(refused.value)
    assert f"task 'Partition 0': its last checkpoint ({CP0}) has the snapshot of store(s) 'counts'" in message
    assert repr(OLD0) in message and repr(OLD1) in message and CP1 in message, message
    assert "and none of store(s) 'tally'" in message, message
    assert "samsa checkpoint forget-store <job config> --store counts" in message, message
    assert refused.value.old_stores == ["counts"] and refused.value.new_stores == ["tally"]
    assert unmendable_exit(refused.value) == CONFIG_ERROR_EXIT


def test_a_store_removed_is_warned_about_not_refused(caplog: pytest.LogCaptureFixture) -> None:
    # `tally` has its own snapshot: no store is new to the checkpoint.
    markers = {"blobstore": {"counts": OLD0, "tally": "job-1/Partition_0/tally/snapshot-index.c"}}
    with caplog.at_level(logging.WARNING, "samsa.stores.blobstore.renamed"):
        check_store_renames({"tally"}, ["tally"], {"Partition 0": (CP0, markers)})
    (warned,) = [r.getMessage() for r in caplog.records]
    assert "store counts:" in warned and OLD0 in warned and "samsa blobstore gc" in warned, warned


def test_a_store_with_a_marker_of_another_backend_is_no_new_store(caplog: pytest.LogCaptureFixture) -> None:
    # Migration step 1 of a changelog-backed store (its blob-store backup added) while a blob-only store
    # is removed in the same deploy: not a rename.
    markers = {"changelog": {"logged": '{"offset": 4}'}, "blobstore": {"counts": OLD0}}
    with caplog.at_level(logging.WARNING, "samsa.stores.blobstore.renamed"):
        check_store_renames({"logged"}, ["logged"], {"Partition 0": (CP0, markers)})
    assert len(caplog.records) == 1


def test_nothing_to_say_without_a_snapshot_of_a_store_the_job_no_longer_defines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "samsa.stores.blobstore.renamed"):
        # A store new to the job, its checkpoint naming only stores the job defines: a first start of it.
        check_store_renames(
            {"counts", "new"}, ["counts", "new"], {"Partition 0": (CP0, {"blobstore": {"counts": OLD0}})}
        )
        check_store_renames({"counts"}, ["counts"], {})
    assert not caplog.records
