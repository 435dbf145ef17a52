"""The TestRunner on the in-memory system: inputs, outputs, stores, restarts, the pytest fixture, the docs."""

from __future__ import annotations

import doctest
import gc
import json
import re
import subprocess
import sys
import weakref
from collections import Counter
from pathlib import Path

import pytest

import samsa.testing.runner as runner_module
from samsa import MessageCollector, OutgoingMessage, StreamTask, TaskContext, TaskCoordinator
from samsa.examples.enrichment import generator as enrichment
from samsa.examples.enrichment.task import UNKNOWN, EnrichOrders
from samsa.examples.wordcount.task import WordCount
from samsa.kafka.inmemory import broker
from samsa.runtime.config.loader import load_raw
from samsa.testing import Message, TestRunner, TestRunnerError

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = {"wordcount.output.stream": "counts-out"}


def test_the_issues_example_counts_on_top_of_a_stores_initial_contents(tmp_path):
    result = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config(WORDCOUNT)
        .add_input("words", ["a", "b", "a"], partitions=4)
        .add_output("counts-out")
        .add_store("counts", initial={"a": 3})
        .run(timeout=30)
    )
    assert result.store("counts") == {"a": 5, "b": 1}
    assert sorted(result.output("counts-out")) == [1, 4, 5]
    # Outputs keep their keys, and each word's counts come in order.
    by_word: dict[str, list[int]] = {}
    for m in result.messages("counts-out"):
        by_word.setdefault(m.key, []).append(m.value)
    assert by_word == {"a": [4, 5], "b": [1]}


def test_inputs_per_partition_keyed_or_as_messages_land_where_they_are_put(tmp_path):
    runner = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config(WORDCOUNT)
        .add_input("words", {0: ["x", "x"], 2: [("y", "ignored")]}, partitions=3)
        .add_input("more", (Message("v", key="z", partition=1) for _ in range(3)), partitions=2)
        .add_output("counts-out", partitions=2)
        .add_store("counts")
    )
    result = runner.run()
    assert result.store("counts") == {"x": 2, "y": 1, "z": 3}
    assert sum(len(v) for v in result.output_by_partition("counts-out").values()) == 6


def test_a_restart_on_a_new_host_restores_the_store_through_its_changelog(tmp_path):
    runner = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config(WORDCOUNT)
        .add_input("words", ["a"] * 5 + ["b"], partitions=2)
        .add_output("counts-out")
        .add_store("counts")
    )
    assert runner.run().store("counts") == {"a": 5, "b": 1}
    local = list((tmp_path / "state").rglob("*"))
    assert local, "the first run left local state"
    result = runner.restart().add_input("words", ["a", "c"], partitions=2).run()
    # Inputs resumed at the checkpoints (nothing counted twice), state came back from the changelog.
    assert result.store("counts") == {"a": 6, "b": 1, "c": 1}
    assert result.output("counts-out")[-2:] in ([6, 1], [1, 6])


class WindowCount(StreamTask):
    """Counts messages; every window sends the count so far to `ticks`."""

    def init(self, context: TaskContext) -> None:
        self.seen = 0

    def process(self, envelope, collector, coordinator) -> None:
        self.seen += 1

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        collector.send(OutgoingMessage("kafka", "ticks", key="n", value=self.seen))


def test_window_timers_fire_when_the_test_moves_the_clock(tmp_path):
    runner = (
        TestRunner.of(WindowCount, state_dir=tmp_path)
        .with_config({"task.window.ms": "1000"})
        .add_input("events", ["e1", "e2"])
        .add_output("ticks")
    )
    assert runner.run().output("ticks") == []  # time stands still during run()
    assert runner.advance_time(999).output("ticks") == []
    assert runner.advance_time(1).output("ticks") == [2]
    runner.add_input("events", ["e3"])
    assert runner.run().output("ticks") == [2]
    assert runner.advance_time(1000).output("ticks") == [2, 3]


def test_a_crash_restart_recovers_the_committed_state(tmp_path):
    runner = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config(WORDCOUNT)
        .add_input("words", ["a", "b", "a"], partitions=2)
        .add_output("counts-out")
        .add_store("counts")
    )
    runner.run()
    result = runner.restart(crash=True).add_input("words", ["b"], partitions=2).run()
    assert result.store("counts") == {"a": 2, "b": 2}


def test_crashes_and_restarts_in_one_process_fence_the_dead_starts_quietly(tmp_path, caplog):
    # Every start registers its container's checkpoint producer and records itself, fencing the start
    # before it; a crashed or stopped start in this process is no zombie: nothing says one was fenced.
    runner = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config({**WORDCOUNT, "job.container.count": "2", "task.commit.ms": "100"})
        .add_input("words", ["a", "b", "a"], partitions=2)
        .add_output("counts-out")
        .add_store("counts")
    )
    runner.run()
    runner.restart(crash=True).add_input("words", ["b"], partitions=2).advance_time(150)
    runner.restart(keep_local_state=True).add_input("words", ["c"], partitions=2)
    assert runner.run().store("counts") == {"a": 2, "b": 2, "c": 1}
    records = [m for log in _coordinator_logs(runner) for m in log if b"container-start" in (m.key() or b"")]
    assert sorted(json.loads(m.value())["container"] for m in records) == ["0", "0", "0", "1", "1", "1"]
    told = [
        r.getMessage()
        for r in caplog.records
        if "fenced" in r.getMessage() or "newer start" in r.getMessage()
    ]
    assert told == []


def _coordinator_logs(runner: TestRunner) -> list[list]:
    """Every record of the runner's coordinator topic (the job model, the start records), per topic (one)."""
    system = broker(runner._bootstrap)
    names = [t for t in system.partition_counts() if t.startswith("__samsa_coordinator")]
    return [system.read(name, 0, 0, 10_000, committed=True)[0] for name in names]


def test_a_rocksdb_store_with_the_jobs_own_config_and_serdes(tmp_path):
    words = [f"w{i % 7}" for i in range(500)]
    result = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config(
            {
                **WORDCOUNT,
                "job.container.count": "2",
                "systems.kafka.samza.key.serde": "string",
                "systems.kafka.samza.msg.serde": "string",
                "systems.kafka.streams.counts-out.samza.msg.serde": "long",
                "stores.counts.factory": "rocksdb",
                "stores.counts.key.serde": "string",
                "stores.counts.msg.serde": "long",
                "stores.counts.changelog": "kafka.my-counts-changelog",
            }
        )
        .add_input("words", words, partitions=4)
        .add_output("counts-out")
        .run()
    )
    assert result.store("counts") == dict(Counter(words))


def test_a_store_without_a_changelog_is_read_while_the_job_runs_and_after_that_the_error_says_how(tmp_path):
    runner = (
        TestRunner.of(WordCount, state_dir=tmp_path)
        .with_config({**WORDCOUNT, "stores.counts.factory": "inmemory", "stores.counts.key.serde": "json"})
        .with_config({"stores.counts.msg.serde": "json"})
        .add_input("words", ["a", "b", "a"], partitions=2)
        .add_output("counts-out")
    )
    result = runner.run()
    assert sorted(result.output("counts-out")) == [1, 1, 2]
    assert result.store("counts") == {"a": 2, "b": 1}  # from the running tasks' stores
    runner.close()
    with pytest.raises(TestRunnerError, match=r"stores\.counts\.changelog"):
        result.store("counts")


def test_the_enrichment_example_joins_orders_with_its_cdc_adjunct_store(tmp_path):
    partitions = 2
    config = {k: str(v) for k, v in load_raw(REPO / "examples" / "enrichment" / "job.yaml").items()}
    customers = [
        Message(
            json.loads(enrichment.change_event("c", {"id": cid, "name": name}, None, 1)),
            key=enrichment.change_key(cid).decode(),
            partition=enrichment.partition_of(cid, partitions),
        )
        for cid, name in [(1, "Ada"), (2, "Grace"), (3, "Edsger")]
    ]
    orders = {
        p: [
            (str(cid), {"order": f"o{cid}"})
            for cid in (1, 2, 3, 4)
            if enrichment.partition_of(cid, partitions) == p
        ]
        for p in range(partitions)
    }
    result = (
        TestRunner.of(EnrichOrders, state_dir=tmp_path)
        .with_config(config)
        .add_input("customers-cdc", customers, partitions=partitions)
        .add_input("orders", orders, partitions=partitions)
        .run()
    )
    names = {m.value["order"]: m.value["customer_name"] for m in result.messages("orders-enriched")}
    assert names == {"o1": "Ada", "o2": "Grace", "o3": "Edsger", "o4": UNKNOWN}


def test_the_pytest_fixture_gives_a_runner_in_the_tests_tmp_dir(samsa_runner, tmp_path):
    runner = samsa_runner(WordCount)
    result = (
        runner.with_config(WORDCOUNT)
        .add_input("words", ["q"])
        .add_output("counts-out")
        .add_store("counts")
        .run()
    )
    assert result.store("counts") == {"q": 1}
    assert any(tmp_path.iterdir())


def test_results_read_after_close_and_the_records_go_once_runner_and_results_are_gone(tmp_path):
    with TestRunner.of(WordCount, state_dir=tmp_path / "state") as runner:
        runner.with_config(WORDCOUNT).add_input("words", ["a", "b", "a"]).add_output("counts-out")
        runner.add_store("counts")
        result = runner.run()
    assert sorted(result.output("counts-out")) == [1, 1, 2]
    assert result.store("counts") == {"a": 2, "b": 1}
    system = weakref.ref(broker(runner._bootstrap))
    del runner
    gc.collect()
    assert system() is not None, "a result still reads from it"
    del result
    gc.collect()
    assert system() is None, "a test session's runners must not keep every record they saw"


def test_the_modules_docstring_example_runs():
    failures, tried = doctest.testmod(runner_module)
    assert tried > 0 and failures == 0


def test_the_python_examples_of_docs_testing_md_run(tmp_path, monkeypatch):
    text = (REPO / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/testing.md has python examples"
    monkeypatch.chdir(tmp_path)
    for number, block in enumerate(blocks):
        if re.search(r"^def test_", block, re.M):
            _run_as_a_pytest_file(tmp_path / f"test_docs_testing_md_{number}.py", block)
        else:
            exec(compile(block, "docs/testing.md", "exec"), {"__name__": "docs_example"})
    # Run as written, the examples leave nothing in the user's working dir but their own test files and
    # the DeterministicScheduler example's store dirs (a job's, as `samsa run`'s, which it says to look at).
    left = {p.name for p in tmp_path.iterdir()} - {"__pycache__", "scheduler-state", "state"}
    assert {n for n in left if not n.startswith("test_docs_testing_md_")} == set()


def _run_as_a_pytest_file(path: Path, block: str) -> None:
    """Runs a doc's pytest example as the user would: a test file of its own, with samsa's pytest plugin."""
    path.write_text(block)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("pytest")), "-q", "-p", "no:cacheprovider", path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"docs/testing.md example as {path.name}:\n{block}\n{done.stdout[-3000:]}"
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-3000:]
