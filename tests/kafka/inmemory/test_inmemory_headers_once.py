"""The in-memory system turns a record's headers into the stored form once, in the producer: the broker
(either one) and the delivery report keep that form as is, so a record with headers costs one pass."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.kafka import KafkaAdmin, KafkaProducer
from samsa.kafka.inmemory import forget, memory, message, producer, sqlite


@pytest.fixture(params=["inmemory-process", "inmemory-file"])
def bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "inmemory-file":
        yield f"inmemory://{tmp_path / 'broker'}"
        return
    url = f"inmemory://headers-once-{uuid.uuid4().hex}"
    yield url
    forget(url)


@pytest.mark.parametrize("headers", [[("trace", "abc"), ("n", b"1")], {"trace": "abc", "n": b"1"}])
def test_a_records_headers_are_normalized_once_per_record(
    bootstrap: str, headers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    admin.create_topic("t", 1)
    admin.close()
    passes: list[object] = []
    real = message.stored_headers

    def counted(given: Any) -> Any:
        passes.append(given)
        return real(given)

    for module in (message, memory, sqlite, producer):
        monkeypatch.setattr(module, "stored_headers", counted)
    reports: list[Any] = []
    sender = KafkaProducer(
        {
            "bootstrap.servers": bootstrap,
            "delivery.report.only.error": False,
            "on_delivery": lambda err, msg: reports.append(msg),
        }
    )
    for n in range(3):
        sender.send("t", b"v%d" % n, b"k", None, headers)
    sender.close()
    assert len(passes) == 3  # one per record: not again by the broker, nor for the delivery report
    assert [r.headers() for r in reports] == [[("trace", b"abc"), ("n", b"1")]] * 3
