"""The word-count demo's job: its renamed topics leave no key of the job.yaml naming a stream it lacks."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from samsa.examples.wordcount.demo import JOB, wordcount_command
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.config.loader import load_raw
from samsa.runtime.validation import check_job
from samsa.streams import SystemStream


def test_the_demos_job_starts_without_a_warning_and_writes_counts_as_longs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    command = wordcount_command("127.0.0.1:9092", "words-1", "wordcount-counts-1", "1", tmp_path)
    overrides = dict(c.removeprefix("--config=").split("=", 1) for c in command if c.startswith("--config="))
    # As `samsa run job.yaml --config=...` loads it.
    job = JobConfig(Config({**load_raw(JOB), **overrides}))
    with caplog.at_level(logging.INFO, "samsa.runtime.validation"):
        check_job(job)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert job.stream(SystemStream("kafka", "wordcount-counts-1")).msg_serde == "long"
    assert job.stream(SystemStream("kafka", "words-1")).msg_serde == "string"
