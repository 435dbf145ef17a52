"""Spark's JVM dying under a running job (the OOM killer, a kill -9): the driver says so once, in Samsa's
words, and exits 1; no Python traceback, no container restarted through the dead gateway."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from background import wait_for
from count_job import WORDS, count_job


def _jvm_of(driver: int) -> int:
    """The pid of the Java process the driver started (pyspark's gateway)."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(driver)], capture_output=True, text=True)
    found = [int(line.split()[0]) for line in out.stdout.splitlines() if "java" in line.split()[1]]
    assert len(found) == 1, out.stdout
    return found[0]


def test_a_killed_spark_jvm_ends_the_driver_with_one_clear_error(
    job_config, topics, produce, read_topic, tmp_path: Path, subprocess_env
):
    words, out = topics(2), topics(1)
    config = count_job(job_config, words, out, **{"job.container.count": "2"})
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    produce(words, [(WORDS[i % len(WORDS)], "1") for i in range(50)])
    log_path = tmp_path / "driver.log"
    with log_path.open("w") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli", "run", "--deploy", "spark", str(job_file)],
            env=subprocess_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for(lambda: log_path.read_text().count("running tasks") >= 2, 120, "two containers")
            jvm = _jvm_of(driver.pid)
            os.kill(jvm, signal.SIGKILL)
            assert driver.wait(timeout=60) == 1
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    text = log_path.read_text()
    assert f"Spark's JVM (pid {jvm}) exited unexpectedly (killed by SIGKILL" in text, text[-3000:]
    assert "start the job again" in text
    assert "Traceback" not in text, text[-3000:]
    assert "restarting it" not in text
