"""Adding a changelog to a blob-store-backed store, and back, on the real broker: every start on a new host.

A changelog that starts after the store already had state holds only the writes since: it must be seeded
with the whole store before a checkpoint records its marker, or a later restore from it loses the rest.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from count_job import WORDS, count_job, store_counts

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.stores.exceptions import RestoreSourceError


def _host_counts(config: dict[str, str]) -> Counter[str]:
    """The counts the live `counts` stores of every task hold, after a run on the host `config` names."""
    job = JobConfig(Config(config))
    root = Path(config["job.logged.store.base.dir"]) / job.job_key
    total: Counter[str] = Counter()
    for store_dir in sorted(root.glob("*/counts")):
        total.update(store_counts(store_dir))
    return total


def _restored(container: Any) -> tuple[int, int]:
    """(files downloaded from the blob store, records replayed from the changelog) at the last start."""
    metrics = container.registry.snapshot()
    downloaded = sum(d["value"] for d in metrics.get("samsa_blobstore_downloaded_files", []))
    replayed = sum(r["value"] for r in metrics.get("samsa_store_restored_records", []))
    return int(downloaded), int(replayed)


def test_a_changelog_added_to_a_blob_backed_store_is_seeded_so_restoring_from_it_is_exact(
    job_config, topics, produce, run_job, tmp_path, kafka_admin
):
    words, out = topics(2), topics(2)
    changelog = f"{words}-counts-changelog"
    blob_only = count_job(
        job_config,
        words,
        out,
        **{"stores.backup.factories": "blobstore", "blobstore.local.dir": str(tmp_path / "blobs")},
    )
    both = {
        **blob_only,
        "stores.counts.changelog": f"kafka.{changelog}",
        "stores.backup.factories": "changelog,blobstore",
    }
    steps = [
        ("blob store only", blob_only, "none"),
        ("changelog added: restores from the blob store", both, "blob"),
        ("restore order changelog,blobstore: from the changelog", both, "changelog"),
        ("restore from the changelog only", {**both, "stores.restore.factories": "changelog"}, "changelog"),
    ]
    sent: list[str] = []
    try:
        for step, (name, config, source) in enumerate(steps):
            # After the switch only one word arrives: the changelog alone would hold only that one.
            batch = random.Random(40 + step).choices(WORDS, k=200) if step == 0 else ["fig"] * 5
            sent += batch
            produce(words, [(w, w) for w in batch])
            host = {**config, "job.logged.store.base.dir": str(tmp_path / f"host-{step}")}
            (container,) = run_job(host)
            assert _host_counts(host) == Counter(sent), name
            downloaded, replayed = _restored(container)
            if source == "blob":  # replayed: the seed reads what the changelog held, to undo it
                assert downloaded > 0, (name, downloaded, replayed)
            elif source == "changelog":
                assert downloaded == 0 and replayed > 0, (name, downloaded, replayed)
    finally:
        kafka_admin.delete_topics([changelog])


def test_back_to_changelog_restore_after_blob_only_refuses_then_seeds_from_the_blob_store(
    job_config, topics, produce, run_job, tmp_path, kafka_admin
):
    words, out = topics(2), topics(2)
    changelog = f"{words}-counts-changelog"
    base = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.changelog": f"kafka.{changelog}", "blobstore.local.dir": str(tmp_path / "blobs")},
    )
    dual = {**base, "stores.backup.factories": "changelog,blobstore"}
    steps: list[tuple[str, dict[str, str], str]] = [
        ("0 changelog only", base, "none"),
        ("1 dual backup", dual, "changelog"),
        (
            "2 restore from the blob store",
            {**dual, "stores.restore.factories": "blobstore,changelog"},
            "blob",
        ),
        ("3 blob store only", {**base, "stores.backup.factories": "blobstore"}, "blob"),
        ("4 blob store only again", {**base, "stores.backup.factories": "blobstore"}, "blob"),
        ("5 refused: restore from the changelog", {**dual, "stores.restore.factories": "changelog"}, "error"),
        (
            "5 dual again, restore from the blob store (seeds the changelog)",
            {**dual, "stores.restore.factories": "blobstore,changelog"},
            "blob",
        ),
        ("6 restore from the changelog", {**dual, "stores.restore.factories": "changelog"}, "changelog"),
    ]
    sent: list[str] = []
    try:
        for step, (name, config, source) in enumerate(steps):
            batch = random.Random(60 + step).choices(WORDS, k=150)
            produce(words, [(w, w) for w in batch])
            sent += batch
            host = {**config, "job.logged.store.base.dir": str(tmp_path / f"host-{step}")}
            if source == "error":
                with pytest.raises(RestoreSourceError) as refused:
                    run_job(host)
                message = str(refused.value)
                assert "store 'counts'" in message and "from blobstore only" in message, message
                assert "stores.counts.restore.factories=blobstore,changelog" in message, message
                continue
            (container,) = run_job(host)
            assert _host_counts(host) == Counter(sent), name
            downloaded, replayed = _restored(container)
            if source == "blob":  # replayed: the seed reads what the changelog held, to undo it
                assert downloaded > 0, (name, downloaded, replayed)
            elif source == "changelog":
                assert downloaded == 0 and replayed > 0, (name, downloaded, replayed)
    finally:
        kafka_admin.delete_topics([changelog])
