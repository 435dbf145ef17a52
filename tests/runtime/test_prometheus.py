"""Tests of the Prometheus text rendering (parsed back line by line) and of the /metrics HTTP server."""

import re
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from samsa.runtime.metrics import CONSUMER_LAG, PROCESS_SECONDS, MetricsError, MetricsRegistry
from samsa.runtime.prometheus import CONTENT_TYPE, PrometheusServer, format_value, render

_SAMPLE_RE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)\Z")
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|\Z)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

Parsed = tuple[dict[str, tuple[str, str]], list[tuple[str, dict[str, str], str]]]


def _unescape(text: str) -> str:
    return re.sub(r"\\.", lambda m: _UNESCAPE[m.group(0)], text)


def parse(text: str) -> Parsed:
    """A strict reader of the text format: {name: (type, help)} and [(name, labels, value)]."""
    assert text.endswith("\n")
    meta: dict[str, tuple[str, str]] = {}
    helps: dict[str, str] = {}
    samples: list[tuple[str, dict[str, str], str]] = []
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, doc = line[len("# HELP ") :].split(" ", 1)
            helps[name] = re.sub(r"\\[\\n]", lambda m: _UNESCAPE[m.group(0)], doc)
        elif line.startswith("# TYPE "):
            name, kind = line[len("# TYPE ") :].split(" ")
            assert name in helps, f"TYPE before HELP for {name}"
            meta[name] = (kind, helps[name])
        else:
            m = _SAMPLE_RE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels: dict[str, str] = {}
            rest = m.group(2) or ""
            while rest:
                lm = _LABEL_RE.match(rest)
                assert lm, f"bad labels in {line!r}"
                labels[lm.group(1)] = _unescape(lm.group(2))
                rest = rest[lm.end() :]
            samples.append((m.group(1), labels, m.group(3)))
    return meta, samples


def test_render_is_exact_for_a_small_registry() -> None:
    reg = MetricsRegistry()
    reg.counter("samsa_messages_processed_total", "Messages processed.", {"task": "Partition 0"}).inc(3)
    reg.gauge("samsa_container_tasks", "Tasks in the container.", {"container": "0"}).set(2)
    timer = reg.timer("samsa_process_seconds", "Time in process().", {"task": "Partition 0"})
    timer.update_ns(1_500_000_000)
    timer.update_ns(500_000_000)
    reg.gauge("plain", "No labels.").set(0.25)

    assert render(reg) == (
        "# HELP samsa_messages_processed_total Messages processed.\n"
        "# TYPE samsa_messages_processed_total counter\n"
        'samsa_messages_processed_total{task="Partition 0"} 3\n'
        "# HELP samsa_container_tasks Tasks in the container.\n"
        "# TYPE samsa_container_tasks gauge\n"
        'samsa_container_tasks{container="0"} 2\n'
        "# HELP samsa_process_seconds Time in process().\n"
        "# TYPE samsa_process_seconds summary\n"
        'samsa_process_seconds_count{task="Partition 0"} 2\n'
        'samsa_process_seconds_sum{task="Partition 0"} 2.0\n'
        "# HELP samsa_process_seconds_max Maximum of samsa_process_seconds since the previous scrape, "
        "in seconds.\n"
        "# TYPE samsa_process_seconds_max gauge\n"
        'samsa_process_seconds_max{task="Partition 0"} 1.5\n'
        "# HELP plain No labels.\n"
        "# TYPE plain gauge\n"
        "plain 0.25\n"
    )


def test_render_parses_back_with_types_help_and_values() -> None:
    reg = MetricsRegistry()
    reg.counter("c_total", "A counter.", {"task": "t0", "topic": "in"}).inc(2)
    reg.counter("c_total", "A counter.", {"task": "t1", "topic": "in"}).inc(5)
    reg.timer("t_seconds", "A timer.", {"task": "t0"}).update_ns(3_000)
    meta, samples = parse(render(reg))
    assert meta == {
        "c_total": ("counter", "A counter."),
        "t_seconds": ("summary", "A timer."),
        "t_seconds_max": ("gauge", "Maximum of t_seconds since the previous scrape, in seconds."),
    }
    assert samples == [
        ("c_total", {"task": "t0", "topic": "in"}, "2"),
        ("c_total", {"task": "t1", "topic": "in"}, "5"),
        ("t_seconds_count", {"task": "t0"}, "1"),
        ("t_seconds_sum", {"task": "t0"}, "3e-06"),
        ("t_seconds_max", {"task": "t0"}, "3e-06"),
    ]


def test_label_values_and_help_are_escaped() -> None:
    reg = MetricsRegistry()
    nasty = 'a\\b "quoted"\nnext line'
    reg.gauge("g", 'Help with \\ backslash\nand a newline, "quotes" kept.', {"topic": nasty}).set(1)
    text = render(reg)
    assert 'g{topic="a\\\\b \\"quoted\\"\\nnext line"} 1\n' in text
    assert '# HELP g Help with \\\\ backslash\\nand a newline, "quotes" kept.\n' in text
    meta, samples = parse(text)
    assert meta["g"] == ("gauge", 'Help with \\ backslash\nand a newline, "quotes" kept.')
    assert samples == [("g", {"topic": nasty}, "1")]


def test_callback_gauge_is_evaluated_at_each_render() -> None:
    reg = MetricsRegistry()
    lag = {"value": 42}
    reg.gauge_fn(CONSUMER_LAG, "Lag.", {"task": "t0", "topic": "in", "partition": "0"}, lambda: lag["value"])
    assert parse(render(reg))[1] == [(CONSUMER_LAG, {"task": "t0", "topic": "in", "partition": "0"}, "42")]
    lag["value"] = 0
    assert parse(render(reg))[1][0][2] == "0"


def test_callback_counter_is_typed_counter_and_evaluated_at_each_render() -> None:
    reg = MetricsRegistry()
    seen = {"value": 3}
    reg.counter_fn("x_total", "Things seen.", {"task": "t0"}, lambda: seen["value"])
    meta, samples = parse(render(reg))
    assert meta["x_total"] == ("counter", "Things seen.") and samples == [("x_total", {"task": "t0"}, "3")]
    seen["value"] = 7
    assert parse(render(reg))[1][0][2] == "7"


def test_timer_max_is_per_scrape_while_count_and_sum_accumulate() -> None:
    reg = MetricsRegistry()
    t = reg.timer(PROCESS_SECONDS, "Process.", {"task": "t0"})
    t.update_ns(4_000_000)
    t.update_ns(1_000_000)
    first = {name: value for name, _, value in parse(render(reg))[1]}
    assert first == {
        PROCESS_SECONDS + "_count": "2",
        PROCESS_SECONDS + "_sum": "0.005",
        PROCESS_SECONDS + "_max": "0.004",
    }
    t.update_ns(2_000_000)
    second = {name: value for name, _, value in parse(render(reg))[1]}
    assert second[PROCESS_SECONDS + "_count"] == "3"
    assert float(second[PROCESS_SECONDS + "_sum"]) == pytest.approx(0.007)
    assert second[PROCESS_SECONDS + "_max"] == "0.002"
    third = {name: value for name, _, value in parse(render(reg))[1]}
    assert third[PROCESS_SECONDS + "_max"] == "0.0"


@pytest.mark.parametrize(
    ("value", "text"),
    [(3, "3"), (0.1, "0.1"), (float("nan"), "NaN"), (float("inf"), "+Inf"), (float("-inf"), "-Inf")],
)
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text


def test_empty_registry_renders_nothing() -> None:
    assert render(MetricsRegistry()) == ""


@pytest.fixture
def served() -> Iterator[tuple[MetricsRegistry, PrometheusServer]]:
    reg = MetricsRegistry()
    server = PrometheusServer(reg, port=0, host="127.0.0.1")
    server.start()
    yield reg, server
    server.stop()


def _get(port: int, path: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return resp.status, resp.headers["Content-Type"], resp.read().decode("utf-8")


def test_server_serves_metrics_over_http(served: tuple[MetricsRegistry, PrometheusServer]) -> None:
    reg, server = served
    assert server.port > 0
    lag = {"value": 7}
    reg.gauge_fn(CONSUMER_LAG, "Lag.", {"task": "t0", "topic": "in", "partition": "1"}, lambda: lag["value"])
    reg.counter("c_total", "C.", {"task": "t0"}).inc()

    status, content_type, body = _get(server.port, "/metrics")
    assert (status, content_type) == (200, CONTENT_TYPE)
    assert body == render(reg)
    meta, samples = parse(body)
    assert meta[CONSUMER_LAG] == ("gauge", "Lag.")
    assert (CONSUMER_LAG, {"task": "t0", "topic": "in", "partition": "1"}, "7") in samples

    lag["value"] = 1
    _, _, body = _get(server.port, "/metrics?scrape=2")  # a query string is still /metrics
    assert (CONSUMER_LAG, {"task": "t0", "topic": "in", "partition": "1"}, "1") in parse(body)[1]


@pytest.mark.parametrize("path", ["/", "/metric", "/metrics/extra", "/favicon.ico"])
def test_server_answers_404_elsewhere(served: tuple[MetricsRegistry, PrometheusServer], path: str) -> None:
    _, server = served
    with pytest.raises(urllib.error.HTTPError) as err:
        _get(server.port, path)
    assert err.value.code == 404


def test_server_stop_frees_the_port_and_is_idempotent() -> None:
    server = PrometheusServer(MetricsRegistry(), port=0, host="127.0.0.1")
    server.stop()  # before start: nothing to do
    with server:
        port = server.port
        assert _get(port, "/metrics")[0] == 200
    server.stop()
    with pytest.raises(urllib.error.URLError):
        _get(port, "/metrics")
    # The port can be bound again right away.
    again = PrometheusServer(MetricsRegistry(), port=port, host="127.0.0.1")
    with again:
        assert again.port == port


def test_server_reports_a_busy_port_and_a_double_start() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(MetricsError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            PrometheusServer(MetricsRegistry(), port=port, host="127.0.0.1").start()
    with (
        PrometheusServer(MetricsRegistry(), port=0, host="127.0.0.1") as server,
        pytest.raises(MetricsError, match="already started"),
    ):
        server.start()


class _Socketless:
    """A reply file that fails every write with `error`."""

    def __init__(self, error: OSError) -> None:
        self.error = error

    def write(self, data: bytes) -> int:
        raise self.error

    def flush(self) -> None:
        raise self.error


def _handler(error: OSError):
    from samsa.runtime.prometheus import _MetricsHandler

    handler = object.__new__(_MetricsHandler)  # no socket: only its reply path is under test
    handler.request_version, handler.requestline, handler.command = "HTTP/1.1", "GET /metrics HTTP/1.1", "GET"
    handler.client_address = ("127.0.0.1", 40000)
    handler.wfile = _Socketless(error)
    return handler


@pytest.mark.parametrize("error", [BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")])
def test_a_scraper_hanging_up_before_the_answer_is_no_error(error: OSError, caplog) -> None:
    with caplog.at_level("DEBUG", logger="samsa.runtime.prometheus"):
        _handler(error)._reply(200, b"samsa_up 1\n", CONTENT_TYPE)
    assert "abandoned before the answer" in caplog.text


def test_other_reply_failures_still_raise() -> None:
    with pytest.raises(OSError, match="disk on fire"):
        _handler(OSError("disk on fire"))._reply(200, b"samsa_up 1\n", CONTENT_TYPE)
