"""A container whose store disk fills up says so first (the disk, the store, what to do) and exits for a
restart; a restart once there is room resumes with exact counts."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from count_job import WORDS, count_job, final_counts

SUPPORT = Path(__file__).resolve().parents[1] / "support"
# The small disk: a tmpfs of this size, or, where none can be mounted, this limit on each file's size.
TMPFS_BYTES = 4 << 20
FILE_LIMIT_BYTES = 512 << 10


class SmallDisk:
    """A directory on a small disk: a tmpfs when this process may mount one (root), else the container's
    process gets RLIMIT_FSIZE (`limit`). `make_room()` grows the tmpfs (or drops the limit)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.mounted = _mount(["-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(path)])
        self.limit: int | None = None if self.mounted else FILE_LIMIT_BYTES

    def make_room(self) -> None:
        if self.mounted:
            assert _mount(["-o", "remount,size=256m", str(self.path)]), (
                f"cannot grow the tmpfs at {self.path}"
            )
        self.limit = None

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.path)], check=True, timeout=30)
            self.mounted = False


def _mount(args: list[str]) -> bool:
    try:
        return subprocess.run(["mount", *args], capture_output=True, timeout=30).returncode == 0
    except OSError:  # no mount(8) here
        return False


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    disk = SmallDisk(tmp_path / "disk")
    try:
        yield disk
    finally:
        disk.close()


def _run(
    job_file: Path, env: dict[str, str], delay_s: float, limit: int | None
) -> subprocess.CompletedProcess[str]:
    """Container 0 of the job in a subprocess (`disk_full_run.py`), its commits `delay_s` late."""
    args = [sys.executable, str(SUPPORT / "disk_full_run.py"), str(job_file), str(delay_s)]
    args += [str(limit)] if limit is not None else []
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)


def test_a_full_store_disk_is_reported_first_and_a_restart_with_room_resumes_exactly(
    job_config, topics, produce, read_topic, kafka_admin, small_disk, subprocess_env
):
    words, out = topics(4), topics(4)  # four tasks: one fails while the others commit
    rnd = random.Random(7)
    # Large unique keys fill the disk; the few words are counted many times each.
    sent = [*rnd.choices(WORDS, k=2000), *(rnd.randbytes(500).hex() for _ in range(6000))]
    rnd.shuffle(sent)
    produce(words, [(key, key) for key in sent])
    state = small_disk.path / "state"
    config = count_job(
        job_config,
        words,
        out,
        **{
            "stores.counts.changelog": f"kafka.{words}-counts-changelog",
            "task.commit.ms": "50",
            "task.commit.max.delay.ms": "60000",  # the loop never waits for the slow commit thread
            "job.logged.store.base.dir": str(state),
            "job.non-logged.store.base.dir": str(state),
        },
    )
    job_file = small_disk.path.parent / "job.json"
    job_file.write_text(json.dumps(config))
    try:
        # A slow commit thread: a commit is in flight when the disk fills, and the stop closes its store.
        full = _run(job_file, subprocess_env, 1.0, small_disk.limit)
        log = full.stderr
        errors = [line for line in log.splitlines() if line.startswith("ERROR")]
        # Before the fix, the first errors were the commit threads', one on the store the failing main thread
        # had closed under it, then tracebacks of close() and of the task's process() (or a bare rocksdict
        # Exception, exit status 1):
        #   ERROR commit_3 samsa.checkpoint.commit: task Partition 2: commit failed in its async phase:
        #   StoreError("store 'counts' at .../Partition_2/counts: flush failed: IO error: No space left on
        #   device: While appending to file: .../Partition_2/counts/000013.sst: No space left on device")
        #   ERROR commit_0 samsa.checkpoint.commit: task Partition 0: commit failed in its async phase:
        #   StoreClosedError("store 'counts' is closed; it was used after close() (an iterator or a
        #   reference kept past task shutdown?) - take a new store from the task context instead")
        #   ERROR MainThread samsa.runtime.container: task Partition 0: close() failed while stopping after
        #   an error
        told_first = "\n".join(errors[:3]) or log[-5000:]
        assert errors and errors[0].startswith("ERROR MainThread samsa: disk full: store 'counts' at "), (
            told_first
        )
        first = errors[0]
        assert str(state) in first and "bytes free on that disk" in first, first
        assert "job.logged.store.base.dir" in first and "then restart" in first, first
        assert len(errors) == 1, log[-5000:]  # once
        assert "StoreClosedError" not in log, log[-5000:]  # the race is told as a consequence
        assert full.returncode == 2, log[-5000:]  # a crash, which a supervisor restarts with backoff

        small_disk.make_room()
        resumed = _run(job_file, subprocess_env, 0.0, small_disk.limit)
        assert resumed.returncode == 0, resumed.stderr[-5000:]
        # Outputs may repeat (at-least-once), but the store counted every input exactly once.
        assert final_counts(read_topic(out)) == Counter(sent)
    finally:
        kafka_admin.delete_topics([f"{words}-counts-changelog"])
