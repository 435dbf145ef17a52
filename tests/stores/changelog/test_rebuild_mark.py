"""A lost changelog's rebuild is recorded in the checkpoint before its first record (the marker says
`rebuilding`, naming the host and the local copy): a start elsewhere refuses a partly rebuilt changelog even
once its offsets cover the checkpointed one (R1 H2: it restored it); the next commit's plain marker seals it.
A state given up while the rebuild was unsealed (`given_up`) starts empty (R1 M2: a mix of old and new)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from samsa.stores.changelog.actions import LocalDir, RestoreInputs, StoreActions
from samsa.stores.changelog.exceptions import ChangelogLostError, ChangelogMarkerError
from samsa.stores.changelog.marker import ChangelogMarker, RebuildMark
from samsa.stores.changelog.restore import ChangelogRestoreManager
from samsa.stores.checkpoint_dirs import write_checked_json
from samsa.streams import SystemStreamPartition

SSP = SystemStreamPartition("kafka", "counts-changelog", 0)
CID = "1795542452386-214973"
MARK = RebuildMark("host-a", f"/state/job/Partition_0/counts-{CID}")


def _plan(
    store_dir: Path,
    checkpointed: ChangelogMarker,
    high: int,
    dirs: tuple[LocalDir, ...] = (),
    rebuilds: dict[str, ChangelogMarker] | None = None,
) -> StoreActions:
    inputs = RestoreInputs(
        "counts",
        SSP,
        True,
        checkpointed,
        None,
        0,
        high,
        dirs,
        now_ms=1e15,
        checkpoint_id=CID,
        task="Partition 0",
    )
    return ChangelogRestoreManager._planned(store_dir, SSP, CID, inputs, rebuilds)


def _older_reader_refuses(text: str) -> bool:
    """The version rule of a Samsa before marker version 2 (its `ChangelogMarker.decode`), the only check
    such a reader makes before taking the marker's offset as a plain position."""
    return json.loads(text).get("version") != 1


def _exact(store_dir: Path, offset: int) -> LocalDir:
    return LocalDir(store_dir.with_name(f"counts-{CID}"), ChangelogMarker(SSP, offset).encode(), 1e15, CID)


def test_a_plain_marker_keeps_version_1_and_a_flagged_one_is_refused_by_an_older_reader() -> None:
    assert json.loads(ChangelogMarker(SSP, 5).encode())["version"] == 1
    for marker in (ChangelogMarker(SSP, 5, MARK), ChangelogMarker(SSP, 5, given_up=True)):
        text = marker.encode()
        assert ChangelogMarker.decode(text) == marker
        # An older Samsa reads version 1 only (it refused any other version): it refuses it
        # (ChangelogMarkerError) rather than take it for a plain position and restore the partial rebuild.
        assert json.loads(text)["version"] == 2
        assert _older_reader_refuses(text)
    assert json.loads(ChangelogMarker(SSP, 5, MARK).encode())["rebuilding"] == {
        "host": "host-a",
        "localDir": MARK.local_dir,
    }
    with pytest.raises(ChangelogMarkerError, match="'rebuilding' needs"):
        ChangelogMarker.decode(
            '{"version":2,"changelog":{"system":"k","stream":"s","partition":0},'
            '"offset":1,"rebuilding":{"host":1}}',
            "counts",
        )


def test_a_rebuild_decided_here_is_handed_to_the_start_to_record_in_the_checkpoint(tmp_path: Path) -> None:
    store_dir = tmp_path / "counts"
    rebuilds: dict[str, ChangelogMarker] = {}
    exact = _exact(store_dir, 999)
    actions = _plan(store_dir, ChangelogMarker(SSP, 999), 300, (exact,), rebuilds)
    assert actions.seed
    assert rebuilds == {
        "counts": ChangelogMarker(SSP, 999, RebuildMark(socket.gethostname(), str(exact.path)))
    }
    # The checkpoint says so already (a start cut short): rebuilt again, nothing more to record.
    again: dict[str, ChangelogMarker] = {}
    assert _plan(store_dir, rebuilds["counts"], 1500, (exact,), again).seed and again == {}


def test_a_rebuild_recorded_in_the_checkpoint_is_refused_on_another_host_once_it_covers_the_checkpoint(
    tmp_path: Path,
) -> None:
    # Cut short twice on host-a: the partly rebuilt changelog ends past the checkpointed offset 999. Here no
    # local state: neither `counts.rebuilding` nor the exact dir.
    with pytest.raises(ChangelogLostError) as refused:
        _plan(tmp_path / "counts", ChangelogMarker(SSP, 999, MARK), 1500)
    message = str(refused.value)
    for named in (
        "'counts'",
        "'Partition 0'",
        "counts-changelog partition 0",
        "host 'host-a'",
        MARK.local_dir,
        "[0, 1499]",
        "forget-changelog <job config> --store counts",
    ):
        assert named in message, message


def test_a_rebuild_recorded_in_the_checkpoint_goes_on_from_the_exact_dir_without_the_local_file(
    tmp_path: Path,
) -> None:
    store_dir = tmp_path / "counts"
    actions = _plan(store_dir, ChangelogMarker(SSP, 999, MARK), 1500, (_exact(store_dir, 999),))
    assert actions.seed and (actions.start, actions.restore_to, actions.end) == (0, -1, 1499)
    assert "unsealed" in actions.notes[0]


def test_a_state_given_up_during_an_unsealed_rebuild_starts_empty(tmp_path: Path) -> None:
    store_dir = tmp_path / "counts"
    (tmp_path / "counts.rebuilding").write_text("left by the cut-short start")
    exact = _exact(store_dir, 999)
    actions = _plan(store_dir, ChangelogMarker(SSP, 999, given_up=True), 1500, (exact,))
    # Nothing replayed, everything the changelog holds undone (tombstones), no local copy reused.
    assert (actions.reuse, actions.delete, actions.start, actions.restore_to, actions.end) == (
        None,
        (exact.path,),
        0,
        -1,
        1499,
    )
    assert not actions.seed and actions.trims and "given up" in actions.notes[0]


def test_a_mark_of_another_changelog_is_left_to_the_plain_decision(tmp_path: Path) -> None:
    # stores.counts.changelog changed since (the start checked the old topic is gone): restored as any.
    old = SystemStreamPartition("kafka", "old-changelog", 0)
    for marker in (ChangelogMarker(old, 999, MARK), ChangelogMarker(old, 999, given_up=True)):
        actions = _plan(tmp_path / "counts", marker, 1500)
        assert not actions.seed and "not kafka.counts-changelog" in actions.notes[0].replace("#0", "")


def test_a_rebuild_refused_elsewhere_names_the_blobstore_backup_as_a_way_on(tmp_path: Path) -> None:
    inputs = RestoreInputs(
        "counts",
        SSP,
        True,
        ChangelogMarker(SSP, 999, MARK),
        None,
        0,
        1500,
        now_ms=1e15,
        checkpoint_id=CID,
        task="Partition 0",
        other_backups=("blobstore",),
    )
    with pytest.raises(ChangelogLostError, match=r"restore\.factories=blobstore,changelog"):
        ChangelogRestoreManager._planned(tmp_path / "counts", SSP, CID, inputs, {})


def test_an_old_checkpoint_of_an_intact_changelog_records_no_rebuild(tmp_path: Path) -> None:
    # A clean exactly-once stop 22 h ago: the checkpoint at 999, its commit record at 1000. It was planned
    # as a rebuild recorded in the checkpoint, so that after a cut-short start a start elsewhere refused the
    # intact changelog as "lost", and the advice (forget-changelog) emptied the store.
    cp_ms = int(CID.split("-")[0])
    store_dir = tmp_path / "counts"
    inputs = RestoreInputs(
        "counts",
        SSP,
        True,
        ChangelogMarker(SSP, 999),
        cp_ms,
        0,
        1001,
        (_exact(store_dir, 999),),
        now_ms=cp_ms + 22 * 3600 * 1000,
        checkpoint_id=CID,
        task="Partition 0",
    )
    rebuilds: dict[str, ChangelogMarker] = {}
    actions = ChangelogRestoreManager._planned(store_dir, SSP, CID, inputs, rebuilds)
    assert not actions.seed and (actions.start, actions.restore_to, actions.end) == (1000, 999, 1000)
    assert rebuilds == {} and not store_dir.with_name("counts.rebuilding").exists()


def test_a_rebuild_this_start_decided_is_not_called_a_recreated_topic_once_abort_records_cover_it(
    tmp_path: Path,
) -> None:
    # Exactly-once: `check` decided the rebuild (the changelog was empty, checkpoint at 8), then the start's
    # abort records moved its end to 10; `init` sees the checkpoint read before the mark was recorded.
    store_dir = tmp_path / "counts"
    write_checked_json(
        store_dir.with_name("counts.rebuilding"), {"checkpoint-id": CID, "changelog": str(SSP)}
    )
    actions = _plan(store_dir, ChangelogMarker(SSP, 8), 11, (_exact(store_dir, 8),))
    assert actions.seed
    assert "unsealed" in actions.notes[0] and "outside" not in actions.notes[0], actions.notes[0]
