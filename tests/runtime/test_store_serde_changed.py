"""A store's msg serde changed between runs while the store holds data, on the real broker: the job stops at
the first read, once, with a configuration error saying what the store holds and what to do; the supervisor
does not restart it (the stored bytes never change, so every restart would meet them again)."""

from __future__ import annotations

import json

from count_job import WORDS, count_job, run_cli
from job_fixtures import job_config, produce, run_job, subprocess_env

__all__ = ["job_config", "produce", "run_job", "subprocess_env"]


def test_a_store_serde_changed_under_stored_data_stops_the_job_without_restarts(
    job_config, topics, produce, run_job, tmp_path, subprocess_env, kafka_admin
):
    words, out = topics(1), topics(1)
    changelog = f"{words}-counts-changelog"
    extra = {"deploy.local.max.restarts": "3", "stores.counts.changelog": f"kafka.{changelog}"}
    config = count_job(job_config, words, out, **extra)
    try:
        produce(words, [(w, w) for w in WORDS])
        run_job(config)
        produce(words, [(w, w) for w in WORDS[:2]])
        job_file = tmp_path / "job.yaml"
        job_file.write_text(json.dumps({**config, "stores.counts.msg.serde": "json"}))

        ran = run_cli(job_file, subprocess_env)
    finally:
        kafka_admin.delete_topics([changelog])

    text = ran.stdout + ran.stderr
    assert ran.returncode == 2, text[-4000:]
    assert "restarting in" not in text, text[-4000:]
    assert "stopped on a configuration error" in text, text[-4000:]
    assert f"in store 'counts': get({WORDS[0]!r})" in text, text[-4000:]
    assert "stores.counts.msg.serde (the json serde) cannot read" in text, text[-4000:]
    assert "Was stores.counts.msg.serde changed while the store held data?" in text
    assert "Set stores.counts.msg.serde back" in text and "a new name" in text
