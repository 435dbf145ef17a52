"""metrics.prometheus.port=0: every container binds a free port of its own and logs it for scrapers."""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.request

import pytest

from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator
from samsa.runtime.exceptions import ConfigError
from samsa.runtime.validation import check_job

SERVING = re.compile(r"container (\d+): serving metrics on http://0\.0\.0\.0:(\d+)/metrics")


def test_port_zero_gives_each_container_a_free_port_of_its_own(
    job_config, topics, produce, caplog: pytest.LogCaptureFixture
):
    inp = topics(2)
    produce(inp, [(None, "x")], partition=0)
    config = job_config(f"kafka.{inp}", topics(1), **{"metrics.prometheus.port": 0, "job.container.count": 2})
    job = JobConfig(Config(config))
    model = JobCoordinator(job).prepare()
    containers = [Container(job, model.container(cid)) for cid in ("0", "1")]
    threads = [threading.Thread(target=c.run) for c in containers]
    caplog.set_level(logging.INFO, logger="samsa.runtime.prometheus")
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        ports: dict[str, int] = {}
        while len(ports) < 2 and time.monotonic() < deadline:
            ports = {m[1]: int(m[2]) for r in caplog.records if (m := SERVING.search(r.getMessage()))}
            time.sleep(0.1)
        assert set(ports) == {"0", "1"}, caplog.text
        assert 0 not in ports.values() and len(set(ports.values())) == 2
        for port in ports.values():
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            assert "samsa_" in text
    finally:
        for container in containers:
            container.stop()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)


def test_a_port_whose_last_container_would_pass_65535_is_refused_at_start() -> None:
    raw = {
        "job.name": "j",
        "task.class": "samsa.runtime.task:StreamTask",
        "task.inputs": "kafka.in",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "localhost:9092",
        "job.container.count": "3",
    }
    with pytest.raises(
        ConfigError, match=r"metrics\.prometheus\.port=65534: .*the last would be 65536.*at most 65533"
    ):
        check_job(JobConfig(Config({**raw, "metrics.prometheus.port": "65534"})))
    check_job(JobConfig(Config({**raw, "metrics.prometheus.port": "65533"})))
    check_job(JobConfig(Config({**raw, "metrics.prometheus.port": "0"})))
