"""A store whose changelog lost the records its checkpoint covers (topic deleted while the job was down) is
never silently emptied: the local copy of the checkpointed state rebuilds the changelog; without one the
start is refused (a config error, exit 2) until the topic's data is back or the loss is accepted with
`samsa checkpoint forget-changelog`."""

from __future__ import annotations

import json
import logging
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from count_job import WORDS, committed_rows, count_job, final_counts, run_cli
from recreated_topics import end_offset, recreate_changelog

from samsa.cli import main
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.stores.changelog.exceptions import ChangelogLostError


def _words(seed: int, k: int) -> list[str]:
    return random.Random(seed).choices(WORDS, k=k)


@pytest.mark.parametrize("kind", ["changelog", "exactly-once"])
def test_a_deleted_changelog_is_rebuilt_from_the_local_state_or_refused_until_the_loss_is_accepted(
    kind,
    job_config,
    topics,
    produce,
    read_topic,
    run_job,
    kafka_admin,
    kafka_bootstrap,
    tmp_path,
    caplog,
    subprocess_env,
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    eos = {"job.processing.guarantee": "exactly_once", "task.outputs": f"kafka.{out}"}
    extra = {"stores.counts.changelog": f"kafka.{changelog}", **(eos if kind == "exactly-once" else {})}
    config = count_job(job_config, words, out, **extra)
    job = JobConfig(Config(config))
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    state_dir: Path = job.logged_store_dir / job.job_key
    seen: list[str] = []

    def run_with(new: list[str]) -> None:
        produce(words, [(w, w) for w in new])
        seen.extend(new)
        run_job(config)

    try:
        run_with(_words(1, 200))
        # Deleted while the job is down (a start creates it again, empty).
        recreate_changelog(kafka_admin, changelog)

        # The local checkpoint dir holds exactly the checkpointed state: restored from it, changelog rebuilt.
        with caplog.at_level(logging.WARNING, logger="samsa.stores.changelog.restore"):
            run_with(_words(2, 50))
        assert "rebuilding the changelog" in caplog.text, caplog.text
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(seen)

        # Another host (no local state) restores the whole state from the rebuilt changelog.
        shutil.rmtree(state_dir)
        run_with(_words(3, 50))
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(seen)

        # Deleted again, and no local copy here: refused, nothing processed, restored or written.
        recreate_changelog(kafka_admin, changelog)
        shutil.rmtree(state_dir)
        produce(words, [(w, w) for w in _words(4, 30)])
        sent = len(committed_rows(kafka_bootstrap, out))
        with pytest.raises(ChangelogLostError) as refused:
            run_job(config)
        message = str(refused.value)
        for named in ("'counts'", "'Partition 0'", f"topic {changelog} partition 0", "forget-changelog"):
            assert named in message, message
        assert len(committed_rows(kafka_bootstrap, out)) == sent
        assert end_offset(kafka_bootstrap, changelog) == 0
        proc = run_cli(job_file, subprocess_env)  # `samsa run`: a config error, not restarted
        assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
        said = proc.stdout + proc.stderr  # the containers' output comes through the supervisor's
        assert "forget-changelog" in said and "restarting" not in said, said[-3000:]
        assert len(committed_rows(kafka_bootstrap, out)) == sent

        # Accepting the loss: the store starts from what the changelog holds (nothing), counting anew.
        assert main(["checkpoint", "forget-changelog", str(job_file), "--store", "counts"]) == 0
        new = _words(5, 40)
        produce(words, [(w, w) for w in new])
        run_job(config)
        counts = final_counts(committed_rows(kafka_bootstrap, out)[sent:])
        assert counts == Counter(_words(4, 30) + new)
    finally:
        kafka_admin.delete_topics([changelog])


def test_a_store_also_backed_up_to_the_blob_store_restores_from_it_and_rebuilds_its_changelog(
    job_config, topics, produce, run_job, kafka_admin, kafka_bootstrap, tmp_path, caplog
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    blob_first = count_job(
        job_config,
        words,
        out,
        **{
            "stores.counts.changelog": f"kafka.{changelog}",
            "stores.backup.factories": "blobstore,changelog",
            "blobstore.local.dir": str(tmp_path / "blobs"),
        },
    )
    changelog_first = {**blob_first, "stores.restore.factories": "changelog,blobstore"}
    job = JobConfig(Config(blob_first))
    state_dir: Path = job.logged_store_dir / job.job_key
    seen: list[str] = []

    def new_host_run(config: dict[str, str], new: list[str]) -> None:
        shutil.rmtree(state_dir, ignore_errors=True)
        produce(words, [(w, w) for w in new])
        seen.extend(new)
        run_job(config)

    try:
        new_host_run(blob_first, _words(1, 100))
        recreate_changelog(kafka_admin, changelog)
        # The blob-store snapshot restores the store (it restores first); the changelog is rebuilt from it.
        with caplog.at_level(logging.WARNING, logger="samsa.stores.changelog.restore"):
            new_host_run(blob_first, _words(2, 30))
        assert "rebuilding the changelog" in caplog.text, caplog.text
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(seen)
        new_host_run({**blob_first, "stores.restore.factories": "changelog"}, _words(3, 30))
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(seen)

        # The changelog restores first: refused, naming the blob store as a way on that loses nothing.
        recreate_changelog(kafka_admin, changelog)
        shutil.rmtree(state_dir)
        with pytest.raises(ChangelogLostError, match=r"restore\.factories=blobstore,changelog"):
            run_job(changelog_first)
        new_host_run(blob_first, _words(4, 30))
        assert final_counts(committed_rows(kafka_bootstrap, out)) == Counter(seen)
    finally:
        kafka_admin.delete_topics([changelog])
