"""Broker outages log a bounded, timely summary: ClientLog's coalescing, and the pump on a real broker."""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path

import pytest

from samsa.kafka import KafkaAdmin, KafkaConsumer, KafkaSystemError
from samsa.kafka.client_log import QUIET_S, SUMMARY_EVERY_S, ClientLog, repeat_key
from samsa.kafka.embedded import EmbeddedBroker

needs_noida = pytest.mark.skipif(
    importlib.util.find_spec("noida_db") is None, reason="noida-db not installed"
)

_REFUSED = (
    "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused "
    "(after {ms}ms in state CONNECT)"
)


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _librdkafka_line(client: ClientLog, ms: int = 0, thread: str = "127.0.0.1:9/bootstrap") -> None:
    # As confluent-kafka calls a `logger`: log(level, "%s [%s] %s", facility, client name, line).
    client.log(
        logging.ERROR,
        "%s [%s] %s",
        "FAIL",
        "rdkafka#consumer-1",
        f"[thrd:{thread}]: {_REFUSED}".format(ms=ms),
    )


def _refused(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "Connection refused" in r.getMessage()]


# -- ClientLog, with a fake clock ---------------------------------------------------------------------------


def test_repeat_key_drops_thread_broker_and_timing() -> None:
    line = "GroupCoordinator: 127.0.0.1:9: Connect to x failed (after 3ms in state CONNECT)"
    assert repeat_key(f"[thrd:GroupCoordinator]: {line}") == "Connect to x failed"
    assert repeat_key(_REFUSED.format(ms=12)) == "Connect to ipv4#127.0.0.1:9 failed: Connection refused"
    assert repeat_key("1/1 brokers are down") == repeat_key("0/2 brokers are down")


def test_first_line_is_logged_repeats_are_counted_and_reported_every_summary_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    client = ClientLog("Kafka consumer (127.0.0.1:9)", clock)
    with caplog.at_level(logging.INFO, logger="samsa.kafka"):
        for i in range(100):
            _librdkafka_line(client, ms=i % 3)
            clock.now += 0.25
        assert len(caplog.records) == 1  # 25 s: only the first line
        assert caplog.records[0].levelno == logging.ERROR
        assert (
            caplog.records[0]
            .getMessage()
            .startswith("FAIL [rdkafka#consumer-1] [thrd:127.0.0.1:9/bootstrap]")
        )
        for _ in range(40):
            _librdkafka_line(client)
            clock.now += 0.25
    summaries = caplog.records[1:]
    assert len(summaries) == 1
    assert summaries[0].levelno == logging.ERROR
    assert (
        "Kafka consumer (127.0.0.1:9): 120 more report(s) in the last 30s (121 since"
        in summaries[0].getMessage()
    )
    assert summaries[0].getMessage().endswith("Connect to ipv4#127.0.0.1:9 failed: Connection refused")


def test_tick_reports_due_repeats_and_ends_a_line_that_stopped(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    client = ClientLog("Kafka consumer (b:9)", clock)
    with caplog.at_level(logging.INFO, logger="samsa.kafka"):
        _librdkafka_line(client)
        _librdkafka_line(client)
        client.tick()
        assert len(caplog.records) == 1
        clock.now += SUMMARY_EVERY_S
        client.tick()  # due: reported without waiting for another repeat
        assert "1 more report(s) in the last 30s" in caplog.records[-1].getMessage()
        clock.now += QUIET_S
        client.tick()  # nothing pending: the episode ends silently
        assert len(caplog.records) == 2
        _librdkafka_line(client)  # a new episode: logged again
    assert len(caplog.records) == 3 and caplog.records[-1].getMessage().startswith("FAIL")


def test_reachable_ends_the_outage_with_one_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    client = ClientLog("Kafka consumer (b:9)", clock)
    other = logging.getLogger("samsa.kafka.consumer")
    with caplog.at_level(logging.INFO, logger="samsa.kafka"):
        client.reachable()  # no outage: nothing
        for _ in range(5):
            _librdkafka_line(client)
            client.record(
                other, logging.WARNING, "Kafka consumer (b:9): MSG_SIZE_TOO_LARGE: not a connection error"
            )
        clock.now += 12
        client.reachable()
        client.reachable()
        client.record(
            other, logging.WARNING, "Kafka consumer (b:9): MSG_SIZE_TOO_LARGE: not a connection error"
        )
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert messages[2].startswith(
        "Kafka consumer (b:9): reaches the cluster again after 12s of connection errors"
    )
    assert "Connection refused (5 report(s))" in messages[2]
    assert caplog.records[2].levelno == logging.INFO


def test_lines_delivered_at_close_are_summed_up_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    client = ClientLog("Kafka consumer (b:9)", clock)
    with caplog.at_level(logging.INFO, logger="samsa.kafka"):
        client.served()
        clock.now += 300
        client.closing()
        for i in range(2000):
            _librdkafka_line(client, ms=i % 7)
        client.log(logging.INFO, "%s [%s] %s", "FAIL", "rdkafka#consumer-1", "b:9/1: Disconnected")
        client.closed()
    assert len(caplog.records) == 1
    record = caplog.records[0]
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith("Kafka consumer (b:9): 2001 librdkafka log line(s) queued between ")
    assert (
        "Connect to ipv4#127.0.0.1:9 failed: Connection refused (x2000); Disconnected (x1)"
        in record.getMessage()
    )


def test_close_reports_what_is_pending_of_an_open_episode(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    client = ClientLog("Kafka consumer (b:9)", clock)
    with caplog.at_level(logging.INFO, logger="samsa.kafka"):
        _librdkafka_line(client)
        clock.now += 5
        _librdkafka_line(client)
        client.closing()
        _librdkafka_line(client)  # queued meanwhile: counted with its episode
        client.closed()
    assert len(caplog.records) == 2
    assert "2 more report(s) until the client closed at" in caplog.records[1].getMessage()


def test_debug_lines_pass_through(caplog: pytest.LogCaptureFixture) -> None:
    client = ClientLog("Kafka consumer (b:9)", _Clock())
    with caplog.at_level(logging.DEBUG, logger="samsa.kafka"):
        for _ in range(3):
            client.log(logging.DEBUG, "%s [%s] %s", "BROKER", "rdkafka#consumer-1", "same debug line")
    assert len(caplog.records) == 3


# -- a real broker going away under a watermark-only consumer ------------------------------------------------


def _outage_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("samsa.kafka")]


@needs_noida
@pytest.mark.integration
def test_broker_outage_under_a_watermark_only_consumer_logs_a_bounded_timely_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before the fix, 3 s of outage queued 118 "Connection refused" lines (two per reconnect attempt, ~20
    # attempts a second) in the never-polled consumer, all logged at its close and none before; the admin
    # client's were dropped unseen.
    broker = EmbeddedBroker().start()
    try:
        bootstrap = broker.bootstrap_servers
        admin = KafkaAdmin({"bootstrap.servers": bootstrap})  # kept open, as the container keeps its admins
        admin.create_topic("outage", 2)
        consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
        assert consumer.watermarks(("outage", 0)) == (0, 0)
        with caplog.at_level(logging.INFO, logger="samsa.kafka"):
            broker.stop()
            time.sleep(3)
            before_close = [r.getMessage() for r in _refused(caplog)]
            consumer.close()
            admin.close()
    finally:
        broker.stop()
    refused = _refused(caplog)
    assert any("consumer" in m for m in before_close), (
        f"the outage was not logged while it lasted: {before_close}"
    )
    assert any("rdkafka#producer" in m or "Kafka admin" in m for m in before_close), before_close
    assert all(r.levelno >= logging.WARNING for r in refused)
    assert len(refused) <= 8, [r.getMessage() for r in refused]  # per client: first, and the rest at close
    assert len(_outage_records(caplog)) <= 20, [r.getMessage() for r in _outage_records(caplog)]


@needs_noida
@pytest.mark.integration
def test_broker_back_after_an_outage_is_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broker = EmbeddedBroker(tmp_path).start()
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    try:
        consumer = KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers})
        with caplog.at_level(logging.INFO, logger="samsa.kafka"):
            with KafkaAdmin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
                admin.create_topic("back", 1)
            assert consumer.watermarks(("back", 0)) == (0, 0)
            broker.stop()
            time.sleep(2)
            broker = EmbeddedBroker(tmp_path, port=port).start()
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert consumer.watermarks(("back", 0), timeout=1) == (0, 0)
                    break
                except KafkaSystemError:
                    if time.monotonic() > deadline:
                        raise
            consumer.close()
    finally:
        broker.stop()
    messages = [r.getMessage() for r in _outage_records(caplog)]
    back = [i for i, m in enumerate(messages) if "reaches the cluster again" in m]
    assert len(back) == 1, messages
    assert "Connection refused" in messages[back[0]]
    # What librdkafka queued before the broker came back is not logged after that line (nor at close).
    assert not [m for m in messages[back[0] + 1 :] if "Connection refused" in m], messages
    assert len(_refused(caplog)) <= 3, messages
