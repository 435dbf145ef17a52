"""Property: whatever files change between commits and wherever a commit crashes, a restore on a fresh host
reproduces the last committed snapshot exactly, and the blob store keeps permanently only what it needs."""

from __future__ import annotations

import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.checkpoint.checkpoint_id import CheckpointId
from samsa.stores.backend import TaskStoresContext
from samsa.stores.blobstore.backup import BlobStoreBackupManager
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.restore import BlobStoreRestoreManager
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.stores.checkpoint_dirs import checkpoint_dir

NAMES = ["a", "b", "c", "CURRENT", "000001.sst"]
DIRS = ["", "sub", "sub/deeper", "other"]
TASK = "Partition 0"

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(DIRS), st.sampled_from(NAMES), st.binary(max_size=600)),
    st.tuples(st.just("delete"), st.sampled_from(DIRS), st.sampled_from(NAMES), st.just(b"")),
    st.tuples(st.just("rmdir"), st.sampled_from(DIRS[1:]), st.just(""), st.just(b"")),
    st.tuples(st.just("mkdir"), st.sampled_from(DIRS[1:]), st.just(""), st.just(b"")),
    st.tuples(st.just("chmod"), st.sampled_from(DIRS), st.sampled_from(NAMES), st.just(b"")),
)
# Where a commit may die: not at all, after its upload (no checkpoint), or after its checkpoint (no cleanup).
crash = st.sampled_from(["none", "none", "after-upload", "after-checkpoint"])
commit = st.tuples(st.lists(op, max_size=6), crash)


def _apply(live: Path, action: tuple[str, str, str, bytes]) -> None:
    kind, sub, name, data = action
    folder = live / sub
    if kind == "write":
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    elif kind == "delete":
        (folder / name).unlink(missing_ok=True)
    elif kind == "rmdir":
        shutil.rmtree(folder, ignore_errors=True)
    elif kind == "mkdir":
        folder.mkdir(parents=True, exist_ok=True)
    elif kind == "chmod" and (folder / name).is_file():
        mode = (folder / name).stat().st_mode & 0o777
        (folder / name).chmod(0o600 if mode != 0o600 else 0o640)


def _tree(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Relative path -> (content, permission bits) for files, None for dirs."""
    out: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = (path.read_bytes(), path.stat().st_mode & 0o777) if path.is_file() else None
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commits=st.lists(commit, min_size=1, max_size=6))
def test_restore_reproduces_the_last_committed_snapshot(tmp_path_factory, commits) -> None:
    root = tmp_path_factory.mktemp("prop")
    live = root / "live"
    live.mkdir()
    store_dir = root / "host" / "job-1" / "Partition_0" / "s"
    store_dir.parent.mkdir(parents=True)
    with ThreadPoolExecutor(4, "blob-io") as io, ThreadPoolExecutor(2, "blob-commit") as commit_pool:
        blobs = LocalDirBlobStore(root / "blobs", io, 3600.0)
        transfer = BlobTransfer(blobs, chunk_size=256)  # small chunks: multi-blob files are common
        context = TaskStoresContext("job-1", TASK, 0, {"s": store_dir}, {"s": {}})

        def manager(markers: dict[str, str] | None) -> BlobStoreBackupManager:
            made = BlobStoreBackupManager(context, ["s"], transfer, commit_pool, "job", "1")
            made.init(markers)
            return made

        committed: dict[str, str] | None = None
        expected: dict[str, tuple[bytes, int] | None] = {}
        backup = manager(None)
        for actions, crash_at in commits:
            for action in actions:
                _apply(live, action)
            checkpoint_id = str(CheckpointId.create())
            shutil.copytree(live, checkpoint_dir(store_dir, checkpoint_id))  # as RocksDB's checkpoint
            markers = backup.upload(checkpoint_id, {}).result()
            if crash_at == "after-upload":
                backup = manager(committed)  # restart: the checkpoint still names the previous commit
                continue
            committed, expected = markers, _tree(live)  # the checkpoint record is durable
            if crash_at == "after-checkpoint":
                backup = manager(committed)  # restart: init finishes the cleanup
                continue
            backup.cleanup(checkpoint_id, markers).result()

        if committed is None:
            return
        manager(committed)  # any restart finishes the cleanup of the checkpointed snapshot
        fresh = root / "fresh-host" / "s"
        fresh.parent.mkdir(parents=True)
        restore_context = TaskStoresContext("job-1", TASK, 0, {"s": fresh}, {"s": {}})
        restorer = BlobStoreRestoreManager(restore_context, transfer, "job", "1")
        restorer.init(committed, None)
        restorer.restore(threading.Event())
        assert _tree(fresh) == expected

        # Permanent blobs are exactly the committed snapshot's; the rest still carry their TTL.
        index = transfer.get_index(committed["s"], backup.base("s"))
        needed = set(index.dir_index.present_blobs()) | {committed["s"]}
        permanent = {info.blob_id for info in blobs.list_blobs() if info.expires_at is None}
        assert permanent == needed
