"""A burst of bad input messages logs the first ones in full, then a count at most every while, and what is
left untold at the container's end (an SRE review: one warning per record buried the log)."""

from __future__ import annotations

import logging

import pytest

from samsa.runtime.bad_message_log import BadMessageLog
from samsa.testing import TestRunner


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_first_ones_in_full_then_a_count_every_while(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    told = BadMessageLog(full=3, every_s=30, clock=clock)
    with caplog.at_level(logging.WARNING):
        for n in range(10):
            told.told(f"skipping message at offset {n}: bad")
        clock.now = 31
        told.told("skipping message at offset 10: bad")
        told.told("skipping message at offset 11: bad")
        told.close()
        told.close()  # nothing more to tell
    assert _lines(caplog) == [
        "skipping message at offset 0: bad",
        "skipping message at offset 1: bad",
        "skipping message at offset 2: bad",
        "3 bad input messages so far: further ones are counted, with one line every 30 s "
        "(samsa_deserialization_errors_total counts each)",
        "8 more bad input message(s); the last: skipping message at offset 10: bad",
        "1 more bad input message(s); the last: skipping message at offset 11: bad",
    ]


def test_a_job_skipping_a_burst_of_bad_records_logs_a_dozen_lines_not_one_per_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = [(b'"k"', b"{not json")] * 200
    with (
        caplog.at_level(logging.WARNING, logger="samsa"),
        TestRunner.of("samsa.examples.wordcount.task:WordCount") as runner,
    ):
        runner.with_config(
            {"task.deserialization.error.policy": "skip", "wordcount.output.stream": "counts"}
        ).add_store("counts").add_input("words", bad, raw=True).add_input("words", ["a", "b"]).add_output(
            "counts"
        ).run()
    lines = [line for line in _lines(caplog) if "bad input message" in line or "skipping message" in line]
    assert len([line for line in lines if line.startswith("skipping message at topic words")]) == 10
    assert lines[-1].startswith("190 more bad input message(s); the last: skipping message at topic words")
