"""A lost changelog's rebuild from the local copy, cut short before a commit sealed it, is recorded in the
checkpoint before its first record: a start on another host (no local copy) is refused, naming the host and
the copy, even once the partly rebuilt changelog's offsets cover the checkpointed one (R1 H2: such a start
restored the partial changelog, silently losing keys and restarting counts); back on that host the rebuild
completes, and its first commit seals it. Giving the state up meanwhile (`samsa checkpoint forget-changelog`)
starts the store empty (R1 M2: a mix of old counts and counts restarted at 1)."""

from __future__ import annotations

import json
import shutil
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from count_job import committed_rows, count_job, final_counts
from recreated_topics import end_offset, recreate_changelog

from samsa.cli import main
from samsa.kafka import KafkaAdmin
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import checkpoint_manager
from samsa.stores.changelog.exceptions import ChangelogRebuildCutShortError
from samsa.stores.changelog.restore import ChangelogRestoreManager

KEYS = [f"w{i}" for i in range(200)]


class _CutShort(Exception):
    """Stands for a kill in the middle of a changelog rebuild (what was sent is flushed first)."""


@pytest.fixture
def cut_rebuild_after(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int | None], None]]:
    """cut_rebuild_after(n): the next starts' rebuilds (seeding a lost changelog) stop after n records
    written; None: they complete."""
    limit: list[int | None] = [None]
    seed = ChangelogRestoreManager._seed

    def cut_seed(self: ChangelogRestoreManager, *args: Any, **kwargs: Any) -> None:
        real = self._producer
        n = limit[0]

        class Counting:
            sent = 0

            def send(self, *a: Any, **k: Any) -> None:
                real.send(*a, **k)
                Counting.sent += 1
                if n is not None and Counting.sent >= n:
                    real.flush()
                    raise _CutShort(f"rebuild cut short after {n} records")

            def flush(self, *a: Any, **k: Any) -> None:
                real.flush(*a, **k)

        self._producer = Counting()  # type: ignore[assignment]
        try:
            seed(self, *args, **kwargs)
        finally:
            self._producer = real

    monkeypatch.setattr(ChangelogRestoreManager, "_seed", cut_seed)

    def set_limit(n: int | None) -> None:
        limit[0] = n

    yield set_limit


def _lost_changelog_job(
    job_config: Callable[..., dict[str, str]],
    topics: Callable[..., str],
    produce: Callable[..., Any],
    run_job: Callable[..., Any],
    kafka_admin: KafkaAdmin,
    exactly_once: bool,
) -> tuple[dict[str, str], str, str, str, Counter[str]]:
    """A counting job run once (every key of KEYS, some twice), then its changelog deleted and recreated
    empty: (config, words topic, output topic, changelog, counts so far)."""
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    eos = {"job.processing.guarantee": "exactly_once", "task.outputs": f"kafka.{out}"} if exactly_once else {}
    config = count_job(job_config, words, out, **{"stores.counts.changelog": f"kafka.{changelog}", **eos})
    seen = KEYS + KEYS[:40]
    produce(words, [(w, w) for w in seen])
    run_job(config)
    recreate_changelog(kafka_admin, changelog)
    return config, words, out, changelog, Counter(seen)


@pytest.mark.parametrize("kind", ["changelog", "exactly-once"])
def test_a_cut_short_rebuild_is_refused_on_another_host_until_it_completes_where_the_copy_is(
    kind,
    job_config,
    topics,
    produce,
    run_job,
    kafka_admin,
    kafka_bootstrap,
    tmp_path,
    cut_rebuild_after,
):
    config, words, out, changelog, seen = _lost_changelog_job(
        job_config, topics, produce, run_job, kafka_admin, kind == "exactly-once"
    )
    job = JobConfig(Config(config))
    state_dir: Path = job.logged_store_dir / job.job_key
    try:
        # Cut short twice (a crash loop): the second start undoes the first one's records, then seeds on.
        cut_rebuild_after(len(KEYS) // 2)
        with pytest.raises(_CutShort):
            run_job(config)
        cut_rebuild_after(len(KEYS) // 4)
        with pytest.raises(_CutShort):
            run_job(config)
        end = end_offset(kafka_bootstrap, changelog)
        checkpoint = _checkpoint_marker(config)
        checkpointed = checkpoint["offset"]
        assert end - 1 >= checkpointed, (end, checkpoint)  # the partial rebuild covers the checkpoint
        assert checkpoint["rebuilding"]["host"] == socket.gethostname()

        # Another host: no local state. Refused, naming the host and the local copy; nothing processed.
        cut_rebuild_after(None)
        elsewhere = tmp_path / "host-a-state"
        shutil.move(state_dir, elsewhere)
        produce(words, [(w, w) for w in KEYS[:10]])
        seen.update(KEYS[:10])
        sent = len(committed_rows(kafka_bootstrap, out))
        with pytest.raises(ChangelogRebuildCutShortError) as refused:
            run_job(config)
        message = str(refused.value)
        for named in (
            "'counts'",
            f"topic {changelog} partition 0",
            repr(socket.gethostname()),
            "forget-changelog",
        ):
            assert named in message, message
        assert len(committed_rows(kafka_bootstrap, out)) == sent

        # Back where the copy is: rebuilt again, completed, sealed by the first commit.
        shutil.rmtree(state_dir, ignore_errors=True)
        shutil.move(elsewhere, state_dir)
        run_job(config)
        assert "rebuilding" not in _checkpoint_marker(config)
        assert final_counts(committed_rows(kafka_bootstrap, out)) == seen

        # Sealed: another host restores all of it from the rebuilt changelog.
        shutil.rmtree(state_dir)
        produce(words, [(w, w) for w in KEYS[10:20]])
        seen.update(KEYS[10:20])
        run_job(config)
        assert final_counts(committed_rows(kafka_bootstrap, out)) == seen
    finally:
        kafka_admin.delete_topics([changelog])


def test_forgetting_the_state_during_a_cut_short_rebuild_starts_the_store_empty(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap, tmp_path, cut_rebuild_after
):
    config, words, out, changelog, _ = _lost_changelog_job(
        job_config, topics, produce, run_job, kafka_admin, False
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    try:
        cut_rebuild_after(len(KEYS) // 2)
        with pytest.raises(_CutShort):
            run_job(config)
        cut_rebuild_after(None)
        assert main(["checkpoint", "forget-changelog", str(job_file), "--store", "counts"]) == 0
        sent = len(committed_rows(kafka_bootstrap, out))
        produce(words, [(w, w) for w in KEYS])
        run_job(config)  # on the host of the local copy, its `.rebuilding` file there too
        # Given up: every word counted anew, none with an old count from the partial rebuild.
        assert final_counts(committed_rows(kafka_bootstrap, out)[sent:]) == Counter(KEYS)
        # And the changelog reads back as that state on another host.
        job = JobConfig(Config(config))
        shutil.rmtree(job.logged_store_dir / job.job_key)
        produce(words, [(w, w) for w in KEYS[:5]])
        run_job(config)
        assert final_counts(committed_rows(kafka_bootstrap, out)[sent:]) == Counter(KEYS) + Counter(KEYS[:5])
    finally:
        kafka_admin.delete_topics([changelog])


def _checkpoint_marker(config: dict[str, str]) -> dict[str, Any]:
    """The changelog marker of store counts in task Partition 0's last checkpoint (V2)."""
    checkpoint = checkpoint_manager(JobConfig(Config(config))).read_last((2,))["Partition 0"]
    return json.loads(checkpoint.state_markers["changelog"]["counts"])  # type: ignore[union-attr]
