"""`samsa eos retire` on the real broker: an upstream job redeployed under a new job.id stalls its downstream
job until its old deployment is retired; then every input is counted exactly once."""

import json
import logging

from eos_pipeline import Pipeline, truth

from samsa.cli import main
from samsa.kafka import KafkaAdmin, KafkaProducer

FIRST = ["a b c", "b c d", "a a e", "f g a"] * 2
LATER = ["c c c", "d e f g", "a z"] * 2


def test_retiring_a_redeployed_upstream_job_lets_its_downstream_commit_again(
    kafka_bootstrap, tmp_path, caplog, capsys
):
    pipeline = Pipeline(tmp_path, stages=2, tasks=(2, 2), intermediate_partitions=(2,), url=kafka_bootstrap)
    try:
        pipeline.feed(FIRST)
        old, downstream = pipeline.configs(commit_ms=50)
        pipeline.run_in_turn(1, old, downstream)
        assert pipeline.sink_records() == _counted(FIRST)
        # The upstream job is redeployed under job.id 2 (new producers), reading the lines that come next.
        later = f"later-{pipeline.suffix}"
        with KafkaAdmin({"bootstrap.servers": kafka_bootstrap}) as admin:
            admin.create_topic(later, 2)
        producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap})
        for n, line in enumerate(LATER):
            producer.send(later, line.encode(), partition=n % 2)
        producer.close()
        new = {**old, "job.id": "2", "task.inputs": f"kafka.{later}"}
        pipeline.run_in_turn(2, new, downstream)
        assert pipeline.sink_records() == _counted(FIRST), "job.id 1's producers hold every version back"

        job_file = tmp_path / "old-upstream.yaml"
        job_file.write_text(json.dumps(old))
        with caplog.at_level(logging.ERROR, logger="samsa"):
            assert main(["eos", "retire", str(job_file)]) == 2
        refused = caplog.text
        assert (
            f"job {old['job.name']}-1 looks alive" in refused and "task Partition 0 checkpointed" in refused
        )
        assert "--force" in refused
        capsys.readouterr()
        assert main(["eos", "retire", str(job_file), "--force"]) == 0
        printed = capsys.readouterr().out
        assert f"retired 2 task(s) of job {old['job.name']}-1: 4 retired records" in printed
        assert f"producer {old['job.name']}-1/Partition 1 (id " in printed

        pipeline.run_in_turn(3, downstream)
        expected = truth(FIRST + LATER)
        assert pipeline.sink_records() == {w: list(range(1, n + 1)) for w, n in expected.items()}
        assert pipeline.store() == expected
    finally:
        pipeline.close()


def _counted(lines: list[str]) -> dict[str, list[int]]:
    return {w: list(range(1, n + 1)) for w, n in truth(lines).items()}
