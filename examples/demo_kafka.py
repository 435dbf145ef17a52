"""Kafka for the examples' demos: the given bootstrap servers, or an embedded broker started for the run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from samsa.kafka.embedded import EmbeddedBroker


@contextmanager
def demo_kafka(work_dir: Path, bootstrap: str | None) -> Iterator[str]:
    """A fresh `work_dir`, and bootstrap servers: `bootstrap` when given, else an embedded broker's (kept in
    `work_dir`, stopped on exit)."""
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    if bootstrap:
        yield bootstrap
        return
    broker = EmbeddedBroker(data_dir=work_dir / "broker")
    broker.start()
    print(f"embedded broker at {broker.bootstrap_servers}")
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()
