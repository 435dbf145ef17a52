"""A metrics port that cannot be bound fails the container at once, before any restore, as a configuration
error: the supervisor stops the job instead of restarting the container (and its restore) with backoff."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from count_job import count_job

from samsa.deploy.restarts import CONFIG_ERROR_EXIT, unmendable_exit
from samsa.exceptions import InvalidConfigError
from samsa.kafka.embedded import free_port
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.metrics import MetricsRegistry
from samsa.runtime.prometheus import PrometheusServer


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process (here: a listening socket) holds."""
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", port))
        sock.listen()
        yield port


def test_a_taken_port_is_a_config_error_naming_the_key_the_port_and_the_container(taken_port: int) -> None:
    server = PrometheusServer(MetricsRegistry(), taken_port, name="container 1")
    with pytest.raises(InvalidConfigError) as info:
        server.start()
    message = str(info.value)
    assert message.startswith(f"container 1: cannot serve metrics on 0.0.0.0:{taken_port}: "), message
    assert "metrics.prometheus.port" in message
    assert unmendable_exit(info.value) == CONFIG_ERROR_EXIT
    server.stop()  # nothing was started: a no-op


def _changelog_job(job_config: Any, topics: Any, produce: Any, port: int) -> dict[str, str]:
    words, out = topics(1), topics(1)
    produce(words, [("apple", "apple"), ("pear", "pear")])
    return count_job(
        job_config,
        words,
        out,
        **{"stores.counts.changelog": f"kafka.{words}-counts-changelog", "metrics.prometheus.port": port},
    )


def test_the_container_fails_on_a_taken_port_before_it_restores_anything(
    job_config: Any, topics: Any, produce: Any, taken_port: int, kafka_admin: Any
) -> None:
    config = _changelog_job(job_config, topics, produce, taken_port)
    job = JobConfig(Config(config))
    container = Container(job, JobCoordinator(job).prepare().container("0"))
    try:
        with pytest.raises(
            InvalidConfigError, match=rf"container 0: cannot serve metrics on 0\.0\.0\.0:{taken_port}"
        ):
            container.run()
        # Nothing restored, nothing processed: the restore timer is registered as the restore begins.
        metrics = container.registry.snapshot()
        assert "samsa_container_restore_seconds" not in metrics
        assert "samsa_messages_processed_total" not in metrics
    finally:
        kafka_admin.delete_topics([config["stores.counts.changelog"].split(".", 1)[1]])


def test_the_job_stops_with_status_2_instead_of_restarting_the_container(
    job_config: Any,
    topics: Any,
    produce: Any,
    taken_port: int,
    tmp_path: Path,
    subprocess_env: dict[str, str],
    kafka_admin: Any,
) -> None:
    config = _changelog_job(job_config, topics, produce, taken_port)
    # Two restarts at most: the old behaviour (restarting with backoff, restoring each time) ends quickly too.
    config["deploy.local.max.restarts"] = "2"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))  # JSON is YAML
    try:
        run = subprocess.run(
            [sys.executable, "-m", "samsa.cli", "run", "--until-caught-up", str(job_file)],
            env=subprocess_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        kafka_admin.delete_topics([config["stores.counts.changelog"].split(".", 1)[1]])
    text = run.stdout + run.stderr
    assert run.returncode == 2, text
    assert "restarting in" not in text, "the container was restarted"
    assert f"cannot serve metrics on 0.0.0.0:{taken_port}" in text
    assert "stopped on a configuration error" in text
    assert "restore plan" not in text, "the container restored its stores before it bound the port"


def test_a_port_let_go_within_the_grace_is_bound() -> None:
    # A fenced older start of the container may hold the port for a moment while it stops.
    import socket
    import threading

    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    port = holder.getsockname()[1]
    threading.Timer(0.5, holder.close).start()
    server = PrometheusServer(MetricsRegistry(), port, name="container 0")
    server.start(busy_wait_s=5.0)
    try:
        assert server.port == port
    finally:
        server.stop()
