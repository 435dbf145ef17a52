"""Writes that fill a small disk, one per place that maps a full disk to `StoreDiskFullError`, run on a
tiny tmpfs, or (where none can be mounted) in a subprocess under RLIMIT_FSIZE:
`python disk_full_places.py PLACE DISK SCRATCH FSIZE` prints the error's type and message as JSON.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from samsa.adjunct.offsets import write_offsets
from samsa.deploy.bootstrap import BootstrapPlan, write_partition
from samsa.stores.blobstore.api import BlobMetadata
from samsa.stores.blobstore.diff import dir_diff
from samsa.stores.blobstore.index import DirIndex
from samsa.stores.blobstore.local import LocalDirBlobStore
from samsa.stores.blobstore.transfer import BlobTransfer
from samsa.streams import SystemStreamPartition

#: The small disk: a tmpfs of this size, or, where none can be mounted, this limit on each file's size.
TMPFS_SIZE = "1m"
FILE_LIMIT_BYTES = 256 << 10
#: What each place writes: twice the tmpfs, eight times the file limit.
PAYLOAD_BYTES = 2 << 20
BASE = BlobMetadata("", -1, "job", "1", "Partition 0", "counts")


def blob_restore(disk: Path, scratch: Path) -> Callable[[], object]:
    """A blob-store restore download into the store dir `Partition_0/counts` on the small disk."""
    source = scratch / "snapshot"
    source.mkdir()
    (source / "000012.sst").write_bytes(os.urandom(PAYLOAD_BYTES))
    pool = ThreadPoolExecutor(4)
    store = LocalDirBlobStore(scratch / "blobs", pool, ttl_s=3600)
    store.init()
    transfer = BlobTransfer(store, chunk_size=PAYLOAD_BYTES // 16)
    index = transfer.put_dir(dir_diff(source, DirIndex("")), source, BASE)

    def restore() -> object:
        try:
            return transfer.restore_dir(index, disk / "Partition_0" / "counts", BASE)
        finally:
            store.close()
            pool.shutdown()

    return restore


def sst_write(disk: Path, scratch: Path) -> Callable[[], object]:
    """A state bootstrap's SST file `staging/partition-0.sst` on the small disk (a partition's Spark task)."""
    entries = [(b"key-%08d" % n, os.urandom(1000)) for n in range(PAYLOAD_BYTES // 1000)]
    plan = BootstrapPlan(
        "job-1", {}, "counts", "rows.parquet", "parquet", "key", (), True, 1, str(disk / "staging"), None, {}
    )
    return lambda: write_partition(plan, 0, entries)


def adjunct_offsets(disk: Path, scratch: Path) -> Callable[[], object]:
    """The offsets file of adjunct store `Partition_0/customers` (a stream of very many partitions)."""
    store_dir = disk / "Partition_0" / "customers"
    store_dir.mkdir(parents=True)
    offsets = {SystemStreamPartition("kafka", "customers", p): p for p in range(PAYLOAD_BYTES // 40)}
    return lambda: write_offsets(store_dir, offsets)


def blob_put(disk: Path, scratch: Path) -> Callable[[], object]:
    """A put into a local blob store whose dir, `blobs`, is on the small disk."""
    source = scratch / "000012.sst"
    source.write_bytes(os.urandom(PAYLOAD_BYTES))
    pool = ThreadPoolExecutor(1)
    store = LocalDirBlobStore(disk / "blobs", pool, ttl_s=3600)
    store.init()
    meta = BlobMetadata("000012.sst", PAYLOAD_BYTES, "job", "1", "Partition 0", "counts")

    def put() -> object:
        try:
            return BlobTransfer(store).put_file(source, "000012.sst", meta)
        finally:
            store.close()
            pool.shutdown()

    return put


#: Each place, and the path (under the small disk) its error must name.
PLACES: dict[str, tuple[Callable[[Path, Path], Callable[[], object]], str]] = {
    "blob_restore": (blob_restore, "Partition_0/counts"),
    "sst_write": (sst_write, "staging/partition-0.sst"),
    "adjunct_offsets": (adjunct_offsets, "Partition_0/customers/ADJUNCT-OFFSETS"),
    "blob_put": (blob_put, "blobs"),
}


_SUPPORT = str(Path(__file__).parent)  # on a subprocess's path: its script imports this module


def _mount(args: list[str]) -> bool:
    try:
        return subprocess.run(["mount", *args], capture_output=True, timeout=30).returncode == 0
    except OSError:  # no mount(8) here
        return False


@contextmanager
def small_disk(root: Path) -> Iterator[Path | None]:
    """A dir on a tiny tmpfs (unmounted after), or None where none can be mounted."""
    disk = root / "disk"
    disk.mkdir()
    if not _mount(["-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(disk)]):
        yield None
        return
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True, timeout=30)


def take_the_room(filler: Path, most: int | None = None) -> None:
    """Writes `filler` until the tmpfs it lies on (one `small_disk` mounted) has no room left, or `most`
    bytes are written."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for _ in range(most // 4096) if most is not None else iter(int, 1):
            os.write(fd, bytes(4096))
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


def fill(place: str, root: Path, script: str = __file__) -> tuple[str, str, Path, dict[str, bytes]]:
    """Runs `place` on a small disk under `root`: (the error's type name, its message, the path it must
    name, the files it left on the disk but a filler, by path under the disk). Where no tmpfs can be
    mounted it runs in `python SCRIPT PLACE DISK SCRATCH FSIZE` (a test module that adds places runs them
    so, its places known there), whose files may not grow past the limit."""
    scratch = root / "scratch"
    scratch.mkdir()
    with small_disk(root) as disk:
        if disk is None:
            disk = root / "disk"
            args = [sys.executable, script, place, str(disk), str(scratch), str(FILE_LIMIT_BYTES)]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([_SUPPORT, os.environ.get("PYTHONPATH", "")])}
            done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
            assert done.returncode == 0, done.stderr[-3000:]
            kind, message = json.loads(done.stdout.splitlines()[-1])
        else:
            kind, message = _run(place, disk, scratch, None)
        files = sorted(p for p in disk.rglob("*") if p.is_file() and p.name != "filler")
        left = {p.relative_to(disk).as_posix(): p.read_bytes() for p in files}
        return kind, message, disk / PLACES[place][1], left


def _run(place: str, disk: Path, scratch: Path, limit: int | None) -> tuple[str, str]:
    prepare, _ = PLACES[place]
    act = prepare(disk, scratch)
    if limit is not None:  # once what the place reads is written
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death past the limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        act()
    except Exception as e:
        return type(e).__name__, str(e)
    raise AssertionError(f"{place}: written whole on a disk too small for it")


if __name__ == "__main__":
    name, disk_dir, scratch_dir, limit = sys.argv[1:5]
    print(json.dumps(_run(name, Path(disk_dir), Path(scratch_dir), int(limit))))
