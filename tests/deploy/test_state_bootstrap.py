"""State bootstrap on a real Spark (local[2]) and broker: rows land in the task owning their key's partition,
the job continues from them exactly, and any host restores them (changelog, blob store)."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from bootstrap_test_tasks import ProbeCountTask
from count_job import WORDS, count_job, final_counts, store_counts

from samsa.cli import main
from samsa.deploy import spark as spark_module
from samsa.deploy.bootstrap import BootstrapRequest, PartitionResult, bootstrap_state
from samsa.deploy.exceptions import BootstrapError
from samsa.deploy.spark import Spark, _slots, run_bootstrap
from samsa.kafka import KafkaProducer
from samsa.kafka.partitioner import consistent_partition_for, partition_for
from samsa.runtime.config.config import Config
from samsa.runtime.config.job import JobConfig

PARTITIONS = 4

# What pyspark's worker daemon prints when Spark drops its connection (its workers stopped after a failure):
# the daemon writes to stderr itself, out of reach of Spark's log settings.
_DAEMON_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\):\n(?:  .*pyspark/daemon\.py.*\n)(?:  .*\n)*"
    r"(?:ConnectionResetError|EOFError|BrokenPipeError)(?:: .*)?\n"
)


@pytest.fixture(scope="module")
def spark() -> Iterator[Spark]:
    session = Spark("samsa-test-state-bootstrap", "local[2]", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


def _parquet(spark: Spark, path: Path, counts: dict[str, int]) -> str:
    """A Parquet dataset of (word, count, note) rows, written by Spark itself."""
    rows = [(word, n, f"note {n}") for word, n in counts.items()]
    spark.sql().createDataFrame(rows, "word string, count long, note string").write.parquet(str(path))
    return str(path)


def _bootstrap(spark: Spark, config: dict[str, str], lines: list[str], **request: object) -> list[str]:
    job = JobConfig(Config(config))

    def run(plan, on_done):  # type: ignore[no-untyped-def]
        return run_bootstrap(spark, plan, on_done)

    summary = bootstrap_state(job, BootstrapRequest(**request), run, lines.append)  # type: ignore[arg-type]
    return lines + summary.lines()


def _task_dirs(config: dict[str, str]) -> dict[int, Path]:
    job = JobConfig(Config(config))
    return {p: job.logged_store_dir / job.job_key / f"Partition_{p}" / "counts" for p in range(PARTITIONS)}


def test_bootstrap_100k_rows_then_the_word_count_continues_exactly(
    spark, job_config, topics, produce, read_topic, run_job, tmp_path, kafka_admin, request
):
    words, out = topics(PARTITIONS), topics(PARTITIONS)
    changelog = f"{words}-changelog"  # created by the bootstrap, as the job would
    request.addfinalizer(lambda: kafka_admin.delete_topics([changelog]))
    rng = random.Random(7)
    boot = {f"w{i:06d}": rng.randint(1, 1000) for i in range(100_000)}
    source = _parquet(spark, tmp_path / "counts.parquet", boot)
    # Input produced before the bootstrap, keyed and placed by the producer (librdkafka murmur2).
    sent = rng.choices(list(boot)[:300], k=600) + rng.choices(WORDS, k=100)
    produce(words, [(w, w) for w in sent])
    config = count_job(
        job_config,
        words,
        out,
        **{
            "task.class": "bootstrap_test_tasks:ProbeCountTask",
            "stores.counts.changelog": f"kafka.{changelog}",
            "job.container.count": "2",
        },
    )

    lines = _bootstrap(
        spark, config, [], store="counts", source=source, key="word", values=("count",), offsets="earliest"
    )
    progress = [line for line in lines if line.startswith("Partition ") and " rows, " in line]
    assert len(progress) == PARTITIONS, lines
    assert any("100,000 rows" in line for line in lines), lines
    assert sum(1 for _, _, _, _ in read_topic(changelog)) == 100_000  # any host can restore from it

    ProbeCountTask.SEEN.clear()
    run_job(config)
    seen = ProbeCountTask.SEEN
    assert sorted(seen) == [f"Partition {p}" for p in range(PARTITIONS)]
    for task, held in seen.items():
        p = int(task.split()[-1])
        mine = {w: n for w, n in boot.items() if partition_for(w.encode(), PARTITIONS) == p}
        assert held == mine, f"{task}: {len(held)} keys held, {len(mine)} expected"

    expected = Counter(boot) + Counter(sent)
    last = final_counts(read_topic(out))
    assert last == {w: expected[w] for w in set(sent)}
    local = Counter()
    for store_dir in _task_dirs(config).values():
        local += store_counts(store_dir)
    assert local == expected

    # Another host: no local state; the changelog restores everything, counts included.
    shutil.rmtree(JobConfig(Config(config)).logged_store_dir)
    run_job(config)
    restored = Counter()
    for store_dir in _task_dirs(config).values():
        restored += store_counts(store_dir)
    assert restored == expected


def test_cli_bootstraps_a_blob_backed_store_restored_from_its_snapshot_with_columns_as_a_dict(
    job_config, topics, produce, run_job, tmp_path, subprocess_env
):
    words, out = topics(PARTITIONS), topics(PARTITIONS)
    csv = tmp_path / "rows.csv"
    csv.write_text("word,count,colour\n" + "".join(f"k{i},{i},c{i % 3}\n" for i in range(500)))
    config = count_job(
        job_config,
        words,
        out,
        **{
            "stores.counts.backup.factories": "blobstore",
            "stores.counts.msg.serde": "json",
            "blobstore.local.dir": str(tmp_path / "blobs"),
        },
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "samsa.cli",
            "state",
            "bootstrap",
            "--job",
            str(job_file),
            "--store",
            "counts",
            *("--from", str(csv), "--format", "csv", "--key", "word", "--offsets", "latest"),
        ],
        env={**subprocess_env, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert sum(1 for line in lines if line.startswith("Partition ") and " rows, " in line) == PARTITIONS
    assert "bootstrapped store counts: 500 rows" in done.stdout, done.stdout
    assert "blob-store snapshot" in done.stdout, done.stdout
    shutil.rmtree(JobConfig(Config(config)).logged_store_dir)  # only the blob store has it now
    produce(words, [("late", "late")])  # after --offsets latest: counted from 1
    run_job(config)
    held = {}
    for p, store_dir in _task_dirs(config).items():
        from samsa.stores.rocksdb import RocksDbStore

        db = RocksDbStore(store_dir, name="counts")
        try:
            for key, value in db.all():
                assert partition_for(key, PARTITIONS) == p
                held[key.decode()] = json.loads(value)
        finally:
            db.close()
    expected = {f"k{i}": {"count": i, "colour": f"c{i % 3}"} for i in range(500)}
    assert held == {**expected, "late": 1}


def test_cli_reports_a_bad_row_once_without_sparks_traceback(job_config, topics, tmp_path, subprocess_env):
    # spark.md: Spark's log is kept to errors; a failed task is reported by Samsa, not as Spark's traceback.
    words, out = topics(PARTITIONS), topics(PARTITIONS)
    csv = tmp_path / "dup.csv"
    csv.write_text("word,count\na,1\na,2\n")
    config = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.backup.factories": "blobstore", "blobstore.local.dir": str(tmp_path / "blobs")},
    )
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    done = subprocess.run(
        [
            *(sys.executable, "-m", "samsa.cli", "state", "bootstrap", "--job", str(job_file), "--store"),
            *("counts", "--from", str(csv), "--format", "csv", "--key", "word", "--value", "count"),
        ],
        env={**subprocess_env, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    error = "dup.csv: key b'a' (column 'word') is in more than one row"
    assert done.stderr.count(error) == 1, done.stderr[-3000:]
    # Spark's own reports are gone. (pyspark's worker daemon may still print a ConnectionResetError
    # traceback when Spark stops its Python workers after the failure: it writes to stderr directly.)
    for noise in ("Exception in task", "PythonException", "\tat org.apache", "aborting job"):
        assert noise not in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in _DAEMON_TRACEBACK.sub("", done.stderr), done.stderr[-3000:]


def test_bad_rows_fail_naming_the_file_and_install_nothing(spark, job_config, topics, tmp_path):
    words, out = topics(PARTITIONS), topics(PARTITIONS)
    config = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.backup.factories": "blobstore", "blobstore.local.dir": str(tmp_path / "b")},
    )
    nulls = tmp_path / "nulls.json"
    nulls.write_text('{"word": "a", "count": 1}\n{"word": null, "count": 2}\n')
    with pytest.raises(BootstrapError, match=r"nulls\.json: a row has no key \(column 'word' is null\)"):
        _bootstrap(
            spark, config, [], store="counts", source=str(nulls), format="json", key="word", values=("count",)
        )
    text = tmp_path / "text.json"
    text.write_text('{"word": "a", "count": "many"}\n')
    with pytest.raises(BootstrapError, match=r"text\.json: value column\(s\) 'count' .* serde 'long'"):
        _bootstrap(
            spark, config, [], store="counts", source=str(text), format="json", key="word", values=("count",)
        )
    twice = tmp_path / "twice.json"
    twice.write_text('{"word": "a", "count": 1}\n{"word": "a", "count": 2}\n')
    with pytest.raises(BootstrapError, match=r"twice\.json: key b'a' \(column 'word'\) is in more than one"):
        _bootstrap(
            spark, config, [], store="counts", source=str(twice), format="json", key="word", values=("count",)
        )
    for store_dir in _task_dirs(config).values():
        assert not store_dir.exists() or store_counts(store_dir) == Counter()
    assert not list((tmp_path / "b").glob("**/*index*"))  # no snapshot was uploaded


def test_refusals_before_any_spark_work(job_config, topics, tmp_path, caplog):
    words, other, out = topics(2), topics(3), topics(2)
    config = count_job(job_config, f"{words},kafka.{other}", out, **{"stores.counts.changelog": "kafka.cl"})
    job_file = tmp_path / "job.yaml"
    job_file.write_text(json.dumps(config))
    args = ["state", "bootstrap", "--job", str(job_file), "--from", "x.parquet", "--key", "word"]
    assert main([*args, "--store", "nope"]) == 2
    assert "no such store (stores: counts)" in caplog.text
    assert main([*args, "--store", "counts"]) == 2
    assert "different partition counts" in caplog.text
    plain = count_job(job_config, words, out)
    job_file.write_text(json.dumps(plain))
    assert main([*args, "--store", "counts"]) == 2
    assert "has no state backend" in caplog.text


def test_partition_results_print_one_line_each():
    line = PartitionResult(3, 25_012, 1_200_000, 0.84, "/x.sst", 25_012).line()
    assert line == "Partition 3: 25,012 rows, 1.2 MB in 0.84 s, 25,012 changelog records"


def test_each_task_partition_gets_a_spark_partition_of_its_own(spark):
    for n in (1, 4, 7, 32):
        frame = spark.sql().createDataFrame([(s,) for s in _slots(n)], "slot int")
        assert [row[0] for row in frame.selectExpr(f"pmod(hash(slot), {n})").collect()] == list(range(n))


def test_without_pyarrow_the_rdd_job_places_rows_alike(spark, job_config, topics, tmp_path, monkeypatch):
    monkeypatch.setattr(spark_module, "_arrow", lambda: None)
    words, out = topics(PARTITIONS), topics(PARTITIONS)
    config = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.backup.factories": "blobstore", "blobstore.local.dir": str(tmp_path / "b")},
    )
    boot = {f"r{i}": i for i in range(1, 2001)}
    source = _parquet(spark, tmp_path / "rows.parquet", boot)
    lines = _bootstrap(spark, config, [], store="counts", source=source, key="word", values=("count",))
    assert any("2,000 rows" in line for line in lines), lines
    held = Counter()
    for p, store_dir in _task_dirs(config).items():
        counts = store_counts(store_dir)
        assert all(partition_for(w.encode(), PARTITIONS) == p for w in counts)
        held += counts
    assert held == Counter(boot)


def test_inputs_written_by_librdkafkas_default_partitioner_get_rows_placed_by_crc32(
    spark, job_config, topics, run_job, read_topic, tmp_path, kafka_bootstrap
):
    # confluent-kafka's Producer left at its defaults places keys by CRC32, not murmur2: each row must go to
    # the task that reads its key's partition, or the job counts from another task's state.
    words, out = topics(PARTITIONS), topics(PARTITIONS)
    boot = {f"c{i}": 1000 + i for i in range(40)}
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "partitioner": "consistent_random"})
    for word in boot:
        producer.send(words, word.encode(), key=word.encode())
    producer.flush()
    producer.close()
    assert any(
        consistent_partition_for(w.encode(), PARTITIONS) != partition_for(w.encode(), PARTITIONS)
        for w in boot
    )
    config = count_job(
        job_config,
        words,
        out,
        **{"stores.counts.backup.factories": "blobstore", "blobstore.local.dir": str(tmp_path / "b")},
    )
    source = _parquet(spark, tmp_path / "crc.parquet", boot)
    lines = _bootstrap(
        spark, config, [], store="counts", source=source, key="word", values=("count",), offsets="earliest"
    )
    assert any(line.startswith("placing keys by CRC32") for line in lines), lines
    run_job(config)
    assert final_counts(read_topic(out)) == {w: n + 1 for w, n in boot.items()}
