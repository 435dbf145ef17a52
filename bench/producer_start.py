"""How long a new idempotent producer takes to deliver its first message, with and without Samsa's setting.

Prints figures; it is not a test: `python bench/producer_start.py [--producers 10] [--gap-ms 10]`.
librdkafka asks for an idempotent producer's id (InitProducerId) once a broker it learned from the
metadata is connected, else on a fixed 500 ms timer; with sparse connections (librdkafka's default) that
broker connects only when a message needs it. Each side makes `--producers` new producers on the
embedded broker, one after the other; each waits `--gap-ms` after its creation (a container's start-up
work before its first output), then sends one message and flushes. Timed: the send and flush. The
baseline is librdkafka's default (`enable.sparse.connections=true`), measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.embedded import EmbeddedBroker

TOPIC = "producer-start"


def first_delivery(bootstrap: str, extra: dict[str, object], gap_s: float) -> float:
    producer = KafkaProducer({"bootstrap.servers": bootstrap, **extra})
    try:
        time.sleep(gap_s)
        started = time.monotonic()
        producer.send(TOPIC, b"x", key=b"k")
        producer.flush()
        return time.monotonic() - started
    finally:
        producer.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--producers", type=int, default=10, help="new producers per side (10)")
    parser.add_argument("--gap-ms", type=float, default=10.0, help="wait between creation and send (10)")
    args = parser.parse_args()
    sides = {
        "librdkafka default (sparse connections)": {"enable.sparse.connections": True},
        "Samsa's producer (every broker at once)": {},
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    with (
        tempfile.TemporaryDirectory(prefix="samsa-bench-producer-") as work,
        EmbeddedBroker(Path(work) / "broker") as broker,
    ):
        with KafkaAdmin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            admin.create_topic(TOPIC, 1)
        for _ in range(args.producers):  # the sides alternate, so a slow moment hits both
            for name, extra in sides.items():
                times[name].append(first_delivery(broker.bootstrap_servers, extra, args.gap_ms / 1000))
    print(
        f"first message of a new idempotent producer, send + flush, {args.producers} producers per side, "
        f"{args.gap_ms:g} ms after creation:"
    )
    for name, took in times.items():
        runs = ", ".join(f"{t * 1000:.1f}" for t in took)
        print(f"  {name:<42} median {statistics.median(took) * 1000:7.1f} ms, max {max(took) * 1000:7.1f} ms")
        print(f"  {'':<42} runs (ms): {runs}")
    base, ours = (statistics.median(t) for t in times.values())
    print(f"  Samsa's producer delivers its first message {(base - ours) * 1000:.0f} ms sooner (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
