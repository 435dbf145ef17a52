"""README "A job", followed as written: its job.yaml and its steps, run by bash on an embedded broker."""

from __future__ import annotations

import ast
import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from samsa.examples.wordcount.generator import produce_words
from samsa.kafka.embedded import free_port

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
_TIMEOUT_S = 120


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README.read_text(), re.S)


def test_the_readme_job_runs_verbatim_on_the_embedded_broker_and_counts_every_word(tmp_path: Path) -> None:
    steps = [b for b in _blocks("sh") if "samsa run --until-caught-up job.yaml" in b and "embedded" in b]
    assert len(steps) == 1, "README: one block of steps that starts the broker and runs the job"
    (job,) = [b for b in _blocks("yaml") if "task.class" in b]
    # Verbatim but for the port: 9092 may be taken on the test's machine.
    port = str(free_port())
    (tmp_path / "job.yaml").write_text(job.replace("9092", port))
    script = tmp_path / "steps.sh"
    script.write_text("set -e\n" + steps[0].replace("9092", port))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("KAFKA_BOOTSTRAP", None)
    # A session of its own, so a failing step never leaves the broker behind.
    process = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output = _output(process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    assert process.returncode == 0, output[-4000:]
    assert "ERROR" not in output and "WARNING" not in output, output[-4000:]
    # The last step prints each word's last count; the generator is seeded: these are the words it sent.
    printed = [line for line in output.splitlines() if line.startswith("[(")]
    assert printed, output[-4000:]
    counts = dict(ast.literal_eval(printed[-1]))
    count = int(re.search(r"--count (\d+)", steps[0]).group(1))  # type: ignore[union-attr]
    assert counts == produce_words_expected(count)


def _output(process: subprocess.Popen[str]) -> str:
    """What the steps printed; fails with it when they have not finished within _TIMEOUT_S."""
    try:
        return process.communicate(timeout=_TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        # Stop the group (the broker with it), then read what was printed: the step that hung is in it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        try:
            output = process.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:  # a process that left the group still holds the pipe
            output = "(none read: a process outside the steps' process group holds their output open)"
        pytest.fail(f"the README steps did not finish within {_TIMEOUT_S}s; their output:\n{output[-4000:]}")


def produce_words_expected(count: int) -> dict[str, int]:
    """What `produce_words` sends (it is seeded), told without a broker."""

    class _Dropping:
        def __init__(self, config: object) -> None:
            pass

        def send(self, topic: str, value: bytes, key: bytes) -> None:
            pass

        def flush(self) -> None:
            pass

        def close(self) -> None:
            pass

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("samsa.examples.wordcount.generator.KafkaProducer", _Dropping)
        return produce_words("unused:0", "words", count)
