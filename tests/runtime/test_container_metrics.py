"""A running container serves its metrics in Prometheus text format."""

from __future__ import annotations

import threading
import time
import urllib.request

from samsa.kafka.embedded import free_port
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.container import Container
from samsa.runtime.coordinator import JobCoordinator


def test_metrics_are_served_while_running(job_config, topics, produce, run_job):
    inp = topics(2)
    produce(inp, [(None, str(i)) for i in range(30)], partition=0)
    port = free_port()
    config = job_config(f"kafka.{inp}", topics(1), **{"metrics.prometheus.port": port})
    job = JobConfig(Config(config))
    model = JobCoordinator(job).prepare()
    container = Container(job, model.container("0"))
    thread = threading.Thread(target=container.run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                text = ""
            if 'samsa_messages_processed_total{task="Partition 0"} 30' in text:
                break
            time.sleep(0.2)
        assert 'samsa_messages_processed_total{task="Partition 0"} 30' in text
        assert f'samsa_consumer_lag{{task="Partition 0",topic="{inp}",partition="0"}} 0\n' in text
        assert "samsa_process_seconds_count" in text
        produce(inp, [(None, "x")], partition=1)
    finally:
        container.stop()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert container.registry.snapshot()["samsa_commits_total"][0]["value"] >= 1
