"""A json input holding NaN, an infinity or 1e400 is a bad message: the deserialization policy handles it
(before, it was read, then its output could not be written: the container failed on it again and again)."""

from __future__ import annotations

import json

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig

INPUTS = [b'{"n":1}', b'{"n":NaN}', b'{"n":2}', b'{"n":1e400}', b'{"n":-Infinity}', b'{"n":3.5}']


def _job(job_config, topics, produce, policy: str) -> tuple[str, str, dict[str, str]]:
    inp, out = topics(1), topics(1)
    produce(inp, [("k", v) for v in INPUTS])
    config = job_config(
        f"kafka.{inp}",
        out,
        **{"systems.kafka.samza.msg.serde": "json", "task.deserialization.error.policy": policy},
    )
    return inp, out, config


def test_non_finite_json_inputs_are_skipped_and_the_job_completes(
    job_config, topics, produce, read_topic, run_job
):
    _, out, config = _job(job_config, topics, produce, "skip")
    (container,) = run_job(config)
    assert [json.loads(r[3]) for r in read_topic(out)] == [{"n": 1}, {"n": 2}, {"n": 3.5}]
    (errors,) = container.registry.snapshot()["samsa_deserialization_errors_total"]
    assert errors["value"] == 3 and errors["labels"]["policy"] == "skip"


def test_non_finite_json_inputs_go_to_the_dead_letter_topic_naming_what_was_refused(
    job_config, topics, produce, read_topic, run_job
):
    inp, out, config = _job(job_config, topics, produce, "dlq")
    run_job(config)
    assert [json.loads(r[3]) for r in read_topic(out)] == [{"n": 1}, {"n": 2}, {"n": 3.5}]
    dead = read_topic(f"samsa-dlq-{JobConfig(Config(config)).job_key}", headers=True)
    assert [d[3] for d in dead] == [INPUTS[1], INPUTS[3], INPUTS[4]]
    errors = [dict(d[4])["samsa.error"].decode() for d in dead]
    assert "NaN is not JSON" in errors[0]
    assert "the number 1e400 overflows a float" in errors[1]
    assert "-Infinity is not JSON" in errors[2]
    assert all(dict(d[4])["samsa.source.topic"] == inp.encode() for d in dead)
