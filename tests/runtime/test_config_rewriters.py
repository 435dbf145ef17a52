"""Samza's environment config rewriter (`job.config.rewriters`): every SAMZA_<KEY> variable sets <key> over
the job file's value, in the supervisor and in each container; other rewriter classes are refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from job_files import write_job_file

from samsa.exceptions import InvalidConfigError
from samsa.kafka.inmemory import is_inmemory
from samsa.runtime.config.loader import ENV_REWRITER, environment_config, rewrite

ENV = {"job.config.rewriters": "env", "job.config.rewriter.env.class": ENV_REWRITER}


def test_samza_variables_become_lower_case_dotted_keys_over_the_files_values() -> None:
    raw = {**ENV, "systems.kafka.consumer.sasl.password": "from-file", "task.commit.ms": "1000"}
    environ = {
        "SAMZA_SYSTEMS_KAFKA_CONSUMER_SASL_PASSWORD": "s3cret",
        "SAMZA_TASK_WINDOW_MS": "500",
        "HOME": "/root",
        "samza_lower": "not ours",
    }
    assert rewrite(raw, environ) == {
        **ENV,
        "systems.kafka.consumer.sasl.password": "s3cret",
        "task.commit.ms": "1000",
        "task.window.ms": "500",
    }


def test_without_rewriters_the_environment_is_not_read() -> None:
    raw = {"task.commit.ms": "1000"}
    assert rewrite(raw, {"SAMZA_TASK_COMMIT_MS": "5"}) == raw


def test_each_listed_rewriter_runs_in_order() -> None:
    raw = {"job.config.rewriters": "a, env", **{k: v for k, v in ENV.items() if k != "job.config.rewriters"}}
    raw["job.config.rewriter.a.class"] = ENV_REWRITER
    assert rewrite(raw, {"SAMZA_X_Y": "1"})["x.y"] == "1"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"job.config.rewriters": "env"},
            "job.config.rewriters names 'env' but job.config.rewriter.env.class is not set",
        ),
        (
            {"job.config.rewriters": "kv", "job.config.rewriter.kv.class": "com.example.VaultRewriter"},
            "job.config.rewriter.kv.class=com.example.VaultRewriter: Samsa runs only Samza's environment",
        ),
    ],
)
def test_a_missing_or_java_rewriter_class_is_refused_naming_the_key(
    raw: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidConfigError) as info:
        rewrite(raw, {})
    assert str(info.value).startswith(message)


def test_a_bare_samza_variable_is_refused_and_values_are_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(InvalidConfigError, match="environment variable SAMZA_ names no config key"):
        environment_config({"SAMZA_": "x"})
    caplog.set_level("INFO")
    assert environment_config({"SAMZA_A_B": "TOPSECRET"}) == {"a.b": "TOPSECRET"}
    assert "a.b" in caplog.text and "SAMZA_A_B" in caplog.text and "TOPSECRET" not in caplog.text


def test_samsa_run_takes_a_key_only_from_the_environment_in_its_containers(
    job_config: Any,
    topics: Any,
    produce: Any,
    read_topic: Any,
    tmp_path: Path,
    subprocess_env: dict[str, str],
) -> None:
    inp, out = topics(1), topics(1)
    config = job_config(f"kafka.{inp}", out)
    if is_inmemory(config["systems.kafka.bootstrap.servers"]):
        pytest.skip("samsa run needs a broker its container processes share")
    produce(inp, [("k", "v1"), ("k", "v2")])
    # The containers (processes of their own) find the broker only through the environment.
    in_file = {k: v for k, v in config.items() if k != "systems.kafka.bootstrap.servers"}
    job_file = write_job_file(tmp_path, {**in_file, **ENV})
    env = {
        **subprocess_env,
        "SAMZA_SYSTEMS_KAFKA_BOOTSTRAP_SERVERS": config["systems.kafka.bootstrap.servers"],
        "SAMZA_MYAPP_TOKEN": "TOKENSECRET",
    }
    done = subprocess.run(
        [sys.executable, "-m", "samsa.cli", "run", "--until-caught-up", str(job_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert [r[3] for r in read_topic(out)] == [b"v1", b"v2"]
    assert "TOKENSECRET" not in log
