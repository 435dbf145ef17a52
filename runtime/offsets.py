"""Offsets of a job's input partitions at a reset target: earliest, latest, or the first at a time."""

from __future__ import annotations

from samsa.kafka import KafkaConsumer
from samsa.runtime.config.job import JobConfig
from samsa.runtime.coordinator import client_config
from samsa.streams import SystemStreamPartition


class InputOffsets:
    """Resolves `checkpoint reset --to` style targets (`earliest`, `latest`, epoch ms) per partition, with
    one consumer per system, closed on exit."""

    def __init__(self, job: JobConfig) -> None:
        self.job = job
        self._consumers: dict[str, KafkaConsumer] = {}

    def consumer(self, system: str) -> KafkaConsumer:
        found = self._consumers.get(system)
        if found is None:
            found = self._consumers[system] = KafkaConsumer(client_config(self.job, system))
        return found

    def at(self, ssp: SystemStreamPartition, target: str | int) -> int:
        """The offset of `ssp` at `target`: its low or high watermark, or the first offset at or after a
        time (the high watermark when none is)."""
        consumer = self.consumer(ssp.system)
        tp = (ssp.stream, ssp.partition)
        low, high = consumer.watermarks(tp)
        if target == "earliest":
            return low
        if target == "latest":
            return high
        assert isinstance(target, int)
        return consumer.offsets_for_times([tp], target)[tp]

    def close(self) -> None:
        consumers, self._consumers = self._consumers, {}
        for consumer in consumers.values():
            consumer.close()

    def __enter__(self) -> InputOffsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
