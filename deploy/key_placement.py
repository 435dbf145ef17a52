"""Which hash the job's input producers place keys by, so that a state bootstrap puts each row in the task
that will receive its key's messages: murmur2 (Java's producer, Samsa's) or librdkafka's default
`consistent_random` (CRC32: confluent-kafka and other librdkafka producers left at their defaults).

`sample_inputs` reads the last few keyed records of every input partition; `choose_partitioner` decides
from them (pure, so the rule is testable without a broker); `placer`/`batch_placer` place serialized keys.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from samsa.deploy.exceptions import BootstrapError
from samsa.kafka import KafkaConsumer
from samsa.kafka.partitioner import (
    consistent_partition_for,
    consistent_partitions_for,
    partition_for,
    partitions_for,
)
from samsa.runtime.config.job import JobConfig
from samsa.streams import SystemStream

log = logging.getLogger(__name__)

MURMUR2 = "murmur2"
CONSISTENT = "consistent"
PARTITIONERS = (MURMUR2, CONSISTENT)
# How each placement is named in the command's lines.
_NAMES = {
    MURMUR2: "murmur2 (Java's producer, Samsa's)",
    CONSISTENT: "CRC32 (librdkafka's consistent/consistent_random, confluent-kafka's default)",
}
# Keyed records read per input partition: the newest ones, as their producers place keys now.
SAMPLE_PER_PARTITION = 100
# Bound on the whole sampling: a partition not read to its end by then is judged on what was read.
_SAMPLE_TIMEOUT_S = 15.0


def placer(partitioner: str, partitions: int) -> Callable[[bytes], int]:
    """Serialized key -> its task partition under `partitioner`."""
    if partitioner == CONSISTENT:
        return lambda key: consistent_partition_for(key, partitions)
    return lambda key: partition_for(key, partitions)


def batch_placer(partitioner: str) -> Callable[[Sequence[bytes], int], list[int]]:
    """`placer` over a batch of keys (the columnar path)."""
    return consistent_partitions_for if partitioner == CONSISTENT else partitions_for


@dataclass(frozen=True)
class Sampled:
    """A keyed record read from an input partition of `partitions` partitions."""

    stream: SystemStream
    partition: int
    offset: int
    key: bytes
    partitions: int

    def fits(self, partitioner: str) -> bool:
        return placer(partitioner, self.partitions)(self.key) == self.partition

    def where(self) -> str:
        return f"{self.stream.system}.{self.stream.stream} partition {self.partition} offset {self.offset}"


@dataclass(frozen=True)
class Choice:
    """The placement chosen and why, as the command prints it."""

    partitioner: str
    reason: str

    def line(self) -> str:
        return f"placing keys by {_NAMES[self.partitioner]}: {self.reason}"


def choose_partitioner(
    samples: Sequence[Sampled], streams: Iterable[SystemStream], forced: str | None = None
) -> Choice:
    """The placement the sampled records agree on; `BootstrapError` where they fit neither or both kinds
    are present (naming a record), unless `forced`."""
    if forced is not None:
        if forced not in PARTITIONERS:
            raise BootstrapError(f"--partitioner {forced!r}: use one of {', '.join(PARTITIONERS)}")
        return Choice(forced, "--partitioner")
    names = ", ".join(sorted(f"{s.system}.{s.stream}" for s in streams))
    if not samples:
        log.warning(
            "the job's inputs (%s) hold no keyed records: assuming their producers will place keys by "
            "murmur2, as Java's and Samsa's producers do; if they use librdkafka's default partitioner "
            "(consistent_random: confluent-kafka's Producer left at its defaults), run again with "
            "--partitioner consistent",
            names,
        )
        return Choice(MURMUR2, f"assumed: the inputs ({names}) hold no keyed records yet")
    murmur2 = [s for s in samples if s.fits(MURMUR2)]
    consistent = [s for s in samples if s.fits(CONSISTENT)]
    count = f"{len(samples)} keyed record(s) sampled from {names}"
    if len(murmur2) == len(samples):
        both = " (they fit CRC32 too: too few keys to tell)" if len(consistent) == len(samples) else ""
        return Choice(MURMUR2, f"all {count} are placed so{both}")
    if len(consistent) == len(samples):
        return Choice(CONSISTENT, f"all {count} are placed so")
    neither = [s for s in samples if not s.fits(MURMUR2) and not s.fits(CONSISTENT)]
    fix = (
        "a bootstrapped row would not meet its key's messages. Have the producers place keys by one hash, "
        "or run again with --partitioner murmur2|consistent to place rows by that one anyway (keys the "
        "producers place otherwise then get a row in another task)"
    )
    if neither:
        s = neither[0]
        raise BootstrapError(
            f"{s.where()} holds key {s.key!r}, which neither murmur2 (partition "
            f"{placer(MURMUR2, s.partitions)(s.key)}) nor librdkafka's CRC32 (partition "
            f"{placer(CONSISTENT, s.partitions)(s.key)}) places there ({len(neither)} of {count} fit "
            f"neither: written with explicit partitions or another partitioner?): {fix}"
        )
    m = next(s for s in samples if not s.fits(CONSISTENT))
    c = next(s for s in samples if not s.fits(MURMUR2))
    raise BootstrapError(
        f"the inputs' producers place keys by two hashes: {m.where()} holds key {m.key!r} as murmur2 places "
        f"it, {c.where()} holds key {c.key!r} as librdkafka's CRC32 does ({count}): {fix}"
    )


def sample_inputs(
    job: JobConfig, partitions: int, per_partition: int = SAMPLE_PER_PARTITION
) -> tuple[list[Sampled], list[SystemStream]]:
    """The newest keyed records (non-empty key: librdkafka places an empty one at random) of every input
    the tasks are grouped by, up to `per_partition` of each of its `partitions` partitions; and those
    inputs."""
    from samsa.runtime.coordinator import client_config

    streams = sorted(
        (ss for ss in job.inputs if ss not in job.broadcast_streams), key=lambda s: (s.system, s.stream)
    )
    samples: list[Sampled] = []
    for system in dict.fromkeys(ss.system for ss in streams):
        mine = {ss.stream: ss for ss in streams if ss.system == system}
        with KafkaConsumer(client_config(job, system, "consumer")) as consumer:
            samples += _sample_system(consumer, mine, partitions, per_partition)
    return samples, streams


def _sample_system(
    consumer: KafkaConsumer, streams: dict[str, SystemStream], partitions: int, per_partition: int
) -> list[Sampled]:
    ends: dict[tuple[str, int], int] = {}
    starts: dict[tuple[str, int], int] = {}
    for topic in streams:
        for p in range(partitions):
            low, high = consumer.watermarks((topic, p))
            if high > low:
                ends[(topic, p)] = high
                starts[(topic, p)] = max(low, high - per_partition)
    if not starts:
        return []
    consumer.assign(starts)
    out: list[Sampled] = []
    remaining = set(starts)
    deadline = time.monotonic() + _SAMPLE_TIMEOUT_S
    while remaining and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.2):
            tp = (m.topic(), m.partition())
            if tp not in remaining:
                continue
            key = m.key()
            if key:
                out.append(Sampled(streams[tp[0]], tp[1], m.offset(), key, partitions))
            if m.offset() >= ends[tp] - 1:
                remaining.discard(tp)
        # A partition whose last records are transaction markers or aborted: nothing more to read.
        if remaining:
            for tp, at in consumer.position(remaining).items():
                if at >= ends[tp]:
                    remaining.discard(tp)
    if remaining:
        log.warning(
            "sampling the inputs' keys: %d partition(s) not read to their end in %.0f s (%s); judging "
            "the key placement on the %d keyed record(s) read",
            len(remaining),
            _SAMPLE_TIMEOUT_S,
            ", ".join(f"{t}#{p}" for t, p in sorted(remaining)),
            len(out),
        )
    return out


def detect_partitioner(job: JobConfig, partitions: int, forced: str | None = None) -> Choice:
    """`choose_partitioner` over `sample_inputs` (nothing read when `forced` or with one partition)."""
    if forced is not None:
        return choose_partitioner([], [], forced)
    if partitions == 1:
        return Choice(MURMUR2, "one partition: every key is in partition 0 whatever the hash")
    samples, streams = sample_inputs(job, partitions)
    return choose_partitioner(samples, streams)
