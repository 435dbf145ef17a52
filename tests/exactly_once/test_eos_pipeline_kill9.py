"""Two exactly-once jobs on the real broker, each container its own OS process, under kill -9 of containers of
both jobs: per word the sink holds exactly one record per increment, and the count store the truth."""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from eos_pipeline import Pipeline, truth

from samsa.kafka import OFFSET_BEGINNING, KafkaAdmin, KafkaConsumer
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import JobCoordinator

SUPPORT = Path(__file__).resolve().parents[1] / "support"
SEED = 9
N_LINES = 3000
VOCABULARY = [f"w{i:02d}" for i in range(40)]
#: One kill per chunk of the input (each restart costs a container start of about a second).
MAX_KILLS = 6
#: How long the sink must stay unchanged at its expected size before the jobs are stopped.
SETTLE_S = 1.0
#: From the containers' start until the sink must be complete (a passing run takes about 10 s).
DEADLINE_S = 40.0


def _lines(rng: random.Random) -> list[str]:
    return [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 5))) for _ in range(N_LINES)]


class _SinkReader:
    """Per word, the counts a read_committed consumer sees in the sink now.

    Each poll reads the sink afresh. An incremental read_committed consumer loses records on the embedded
    broker (noida-db 0.2.3): when its fetch waited on a transaction that the producer's next incarnation
    then aborted (`init_transactions` after a kill -9), the next transactions' committed records of that
    producer are skipped - the broker keeps listing the aborted transaction for fetches above it, so the
    client drops that producer id's records. A fresh consumer from the beginning reads them all."""

    def __init__(self, url: str, sink: str) -> None:
        self.url, self.sink = url, sink
        self.records: dict[str, list[int]] = {}
        self.total = 0

    def poll(self) -> int:
        consumer = KafkaConsumer({"bootstrap.servers": self.url, "isolation.level": "read_committed"})
        try:
            # A read_committed consumer's high watermark is the last stable offset: read up to it.
            ends = {(self.sink, p): consumer.watermarks((self.sink, p))[1] for p in range(2)}
            ends = {tp: end for tp, end in ends.items() if end > 0}
            consumer.assign({tp: OFFSET_BEGINNING for tp in ends})
            records: dict[str, list[int]] = defaultdict(list)
            deadline = time.monotonic() + 10
            while any(consumer.position([tp]).get(tp, -1) < end for tp, end in ends.items()):
                assert time.monotonic() < deadline, f"the sink did not read to its stable offsets {ends}"
                for m in consumer.consume(10_000, 0.05):
                    records[m.key().decode()].append(struct.unpack(">q", m.value())[0])
        finally:
            consumer.close()
        self.records = dict(records)
        self.total = sum(map(len, records.values()))
        return self.total


class _Containers:
    """Every container of the pipeline's jobs as its own OS process (`samsa run --container-id`)."""

    def __init__(self, job_files: dict[str, Path], container_ids: dict[str, list[str]], logs: Path) -> None:
        self.job_files = job_files
        self.logs = logs
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
        }
        self.procs: dict[tuple[str, str], subprocess.Popen[bytes]] = {}
        for job, ids in container_ids.items():
            for cid in ids:
                self.start(job, cid)

    def log(self, job: str, cid: str) -> Path:
        return self.logs / f"{job}-container-{cid}.log"

    def start(self, job: str, cid: str) -> None:
        cmd = [sys.executable, "-m", "samsa.cli", "run", str(self.job_files[job])]
        cmd += ["--container-id", cid, "--from-supervisor"]
        with self.log(job, cid).open("ab") as out:
            self.procs[(job, cid)] = subprocess.Popen(
                cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def check_alive(self) -> None:
        for (job, cid), proc in self.procs.items():
            assert proc.poll() is None, (
                f"{job} container {cid} exited with {proc.returncode}:\n{self.tails()}"
            )

    def kill(self, job: str, cid: str, note: str) -> None:
        proc = self.procs[(job, cid)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        with self.log(job, cid).open("a") as out:
            out.write(f"---- test: kill -9 of pid {proc.pid} ({note})\n")

    def wait_running(self, deadline: float) -> None:
        """Until every container's log shows it running since its last start (its stop handler is set)."""
        for job, cid in self.procs:
            while "running tasks" not in self.log(job, cid).read_text().rsplit("---- test: kill", 1)[-1]:
                assert time.monotonic() < deadline, f"{job} container {cid} did not start:\n{self.tails()}"
                self.check_alive()
                time.sleep(0.1)

    def stop(self) -> dict[tuple[str, str], int]:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        return {key: proc.wait(timeout=30) for key, proc in self.procs.items()}

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def tails(self, chars: int = 3000) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}"
            for path in sorted(self.logs.iterdir())
        )


def _prepare(pipeline: Pipeline, tmp_path: Path) -> tuple[dict[str, Path], dict[str, list[str]]]:
    """Job files for both stages (2 containers each), their models published as `samsa run` does."""
    files, ids = {}, {}
    # A short barrier timeout: a stalled alignment names the missing producers in the containers' logs.
    # A downstream task checkpoints once per upstream version it catches up on: the interval must leave
    # room for a checkpoint (a transaction commit) per version, or a restarted task never catches up.
    configs = pipeline.configs(commit_ms=1000, **{"task.eos.barrier.timeout.ms": "5000"})
    for stage, config in zip(("split", "count"), configs, strict=True):
        config["job.container.count"] = "2"
        files[stage] = tmp_path / f"{stage}.yaml"  # JSON is YAML
        files[stage].write_text(json.dumps(config))
        model = JobCoordinator(JobConfig(Config(config))).prepare()
        ids[stage] = [c.id for c in model.containers]
    return files, ids


def test_two_jobs_under_kill_9_count_each_word_exactly_once(kafka_bootstrap, tmp_path):
    rng = random.Random(SEED)
    lines = _lines(rng)
    expected = truth(lines)
    total = sum(expected.values())
    # The input arrives in one chunk per kill: every kill lands while records flow through both jobs.
    chunks = [lines[i::MAX_KILLS] for i in range(MAX_KILLS)]
    pipeline = Pipeline(tmp_path, stages=2, tasks=(3, 2), intermediate_partitions=(2,), url=kafka_bootstrap)
    (tmp_path / "logs").mkdir()
    containers: _Containers | None = None
    sink = _SinkReader(kafka_bootstrap, pipeline.sink)
    try:
        job_files, container_ids = _prepare(pipeline, tmp_path)
        pipeline.feed(chunks[0])
        containers = _Containers(job_files, container_ids, tmp_path / "logs")
        deadline = time.monotonic() + DEADLINE_S
        kills: list[tuple[str, str, int]] = []  # (job, container, committed sink records at the kill)
        for i in range(MAX_KILLS):
            time.sleep(rng.uniform(0.3, 2.0))
            containers.check_alive()
            job = ("split", "count")[i % 2]
            cid = rng.choice(container_ids[job])
            kills.append((job, cid, sink.poll()))
            containers.kill(job, cid, f"the sink held {sink.total} of {total} records")
            containers.start(job, cid)
            if i + 1 < len(chunks):
                pipeline.feed(chunks[i + 1])
        seen, settled_at = sink.poll(), time.monotonic()
        while seen < total or time.monotonic() - settled_at < SETTLE_S:
            assert time.monotonic() < deadline, (
                f"the sink holds {seen} of {total} records after {DEADLINE_S} s; kills (job, container, "
                f"sink records then) {kills}\n{containers.tails()}"
            )
            containers.check_alive()
            time.sleep(0.2)
            if sink.poll() != seen:
                seen, settled_at = sink.total, time.monotonic()
        containers.wait_running(deadline)
        codes = containers.stop()
        logs = containers.tails()
        assert all(rc == 0 for rc in codes.values()), f"exit codes {codes}\n{logs}"
        assert "Traceback" not in logs, logs
        assert any(0 < committed < total for _, _, committed in kills), f"no kill landed mid-output: {kills}"
        wanted = {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert dict(sink.records) == wanted, _diff(dict(sink.records), wanted) + f"; kills {kills}\n{logs}"
        assert pipeline.sink_records() == wanted, "a fresh read_committed consumer sees the same records"
        assert pipeline.store() == expected
        # The changelog: writes tagged, a commit record per version, an abort record per start (a start
        # killed before its log line still wrote one; a restore's undo records are the untagged ones).
        described, kinds = pipeline.changelog()
        assert described == expected
        starts = sum(
            log.read_text().count("exactly-once generation") for log in (tmp_path / "logs").glob("count-*")
        )
        assert kinds["restore"] >= starts and kinds["marker"] > 0 and kinds["data"] > 0, (kinds, starts)
    finally:
        if containers is not None:
            containers.kill_all()
        admin = KafkaAdmin({"bootstrap.servers": kafka_bootstrap})
        try:
            admin.delete_topics([t for t in admin.metadata().topics if pipeline.suffix in t])
        finally:
            admin.close()


def _diff(got: dict[str, list[int]], wanted: dict[str, list[int]]) -> str:
    bad = {
        w: (got.get(w, [])[:20], len(got.get(w, [])), len(c)) for w, c in wanted.items() if got.get(w) != c
    }
    return f"words whose sink counts differ (first 20 counts, got n, expected n): {bad}"
