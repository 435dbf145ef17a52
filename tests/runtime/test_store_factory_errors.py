"""A custom `stores.<s>.factory` of the wrong kind stops the job as a config error naming the key: before any
container starts when the class is not a store or its constructor cannot take (path, spec), at the engine's
opening when the constructor raises TypeError; never a container restarted in a loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from count_job import run_cli

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator
from samsa.stores.exceptions import StoreConfigError


def _job(job_config: Any, topics: Any, produce: Any, factory: str) -> dict[str, str]:
    words, out = topics(1), topics(1)
    produce(words, [("a", "1")])
    return job_config(f"kafka.{words}", out, **{"stores.kv.factory": factory})


@pytest.mark.parametrize(
    ("factory", "problem"),
    [
        (
            "samsa_test_tasks:CountTask",
            "(samsa_test_tasks.CountTask, a samsa.runtime.task.StreamTask) is not a store",
        ),
        (
            "store_factory_engines:Plain",
            "(store_factory_engines.Plain, a plain class) is not a store factory",
        ),
        ("store_factory_engines:NoArgsEngine", "cannot be called as NoArgsEngine(path, spec)"),
    ],
)
def test_a_factory_of_the_wrong_kind_is_refused_before_containers_start(
    job_config: Any,
    topics: Any,
    produce: Any,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    factory: str,
    problem: str,
) -> None:
    config = _job(job_config, topics, produce, factory)
    with pytest.raises(StoreConfigError, match=r"^stores\.kv\.factory: ") as info:
        JobCoordinator(JobConfig(Config(config))).prepare()
    assert problem in str(info.value) and "subclass of samsa.stores.api.KeyValueStore" in str(info.value)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    proc = run_cli(job_file, subprocess_env)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-3000:]
    assert f"stores.kv.factory: {factory}" in text and problem in text, text[-3000:]
    assert "[container-" not in text and "Traceback" not in text, text[-3000:]


def test_a_constructor_raising_type_error_stops_the_job_without_restarts(
    job_config: Any, topics: Any, produce: Any, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    config = _job(job_config, topics, produce, "store_factory_engines:RaisingEngine")
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    proc = run_cli(job_file, subprocess_env)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-3000:]
    assert "stores.kv.factory: store_factory_engines:RaisingEngine(path, spec) raised TypeError" in text, (
        text[-3000:]
    )
    assert "restarting in" not in text, text[-3000:]
