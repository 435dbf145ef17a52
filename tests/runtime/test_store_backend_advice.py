"""The advice of the store-backend config errors, applied literally, gives a job that starts: a job-wide
blob-store backup with an in-memory scratch store (either way the message gives), and a changelog backup of a
store without a changelog. On the real broker."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw
from samsa.runtime.validation import check_job
from samsa.stores.exceptions import StoreConfigError

_SETTING = re.compile(r"(stores\.scratch\.[a-z.]+)=([^\s;]*)")


def _refusal(config: Mapping[str, str]) -> str:
    with pytest.raises(StoreConfigError) as info:
        check_job(JobConfig(Config(dict(config))))
    return str(info.value)


def _apply(config: Mapping[str, str], advice: str, changelog: str) -> dict[str, str]:
    """`advice`'s `key=value` settings on top of `config`, its `<system>.<stream>` filled in."""
    settings = _SETTING.findall(advice)
    assert settings, advice
    return {**config, **{k: v.replace("<system>.<stream>", changelog) for k, v in settings}}


def _ways(message: str) -> list[str]:
    """The ways on a message offers (`Either ...; or ...`)."""
    ways = message.split("Either ", 1)[1].split("; or ")
    assert len(ways) == 2, message
    return ways


@pytest.fixture
def make_mixed(job_config, topics, produce, tmp_path):
    """A new job (its own name and state) with a job-wide blob-store backup and an in-memory store."""
    words, out = topics(1), topics(1)
    produce(words, [("a", "1")])

    def make() -> dict[str, str]:
        return job_config(
            f"kafka.{words}",
            out,
            **{
                "stores.backup.factories": "blobstore",
                "blobstore.local.dir": str(tmp_path / "blobs"),
                "stores.kv.factory": "rocksdb",
                "stores.scratch.factory": "inmemory",
            },
        )

    return make


@pytest.fixture
def mixed(make_mixed):
    return make_mixed()


def test_both_ways_the_blob_store_message_gives_start(make_mixed, kafka_admin, run_job) -> None:
    topic = f"{make_mixed()['job.name']}-scratch-changelog"
    try:
        for way in range(2):  # each on a job of its own: the message is the same for both
            config = make_mixed()
            message = _refusal(config)
            assert "store 'scratch' is inmemory" in message, message
            run_job(_apply(config, _ways(message)[way], f"kafka.{topic}"))
        assert kafka_admin.partition_counts([topic])[topic]  # the changelog way made its changelog
    finally:
        kafka_admin.delete_topics([t for t, n in kafka_admin.partition_counts([topic]).items() if n])


def test_the_yaml_form_the_message_gives_reads_as_empty(mixed, tmp_path: Path) -> None:
    message = _refusal(mixed)
    yaml_line = re.search(r'in YAML: (stores\.scratch\.backup\.factories: "")', message)
    assert yaml_line, message
    job_file = tmp_path / "job.yaml"
    job_file.write_text("".join(f"{k}: {v!r}\n" for k, v in mixed.items()) + yaml_line.group(1) + "\n")
    config = load_raw(job_file)
    assert config["stores.scratch.backup.factories"] == ""
    check_job(JobConfig(Config(config)))


def test_both_ways_the_missing_changelog_message_gives_start(make_mixed, kafka_admin, run_job) -> None:
    topic = f"{make_mixed()['job.name']}-scratch-changelog"
    try:
        for way in range(2):
            config = {**make_mixed(), "stores.scratch.backup.factories": "changelog"}
            message = _refusal(config)
            assert message.startswith("stores.scratch.changelog: is required"), message
            run_job(_apply(config, message.split(", or, ", 1)[way], f"kafka.{topic}"))
    finally:
        kafka_admin.delete_topics([t for t, n in kafka_admin.partition_counts([topic]).items() if n])
