"""Prometheus text exposition (format 0.0.4) of a MetricsRegistry, and a tiny HTTP server for /metrics."""

from __future__ import annotations

import errno
import logging
import math
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

from samsa.runtime.metrics import (
    FamilySample,
    MetricsError,
    MetricsPortError,
    MetricsRegistry,
    Sample,
    TimerSample,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METRICS_PATH = "/metrics"
# How often the server thread checks for stop(): bounds how long stop() blocks; 10 wake-ups/s idle is nothing.
_POLL_INTERVAL_S = 0.1
_BUSY_RETRY_S = 0.25  # between binds of a port in use, while a container's older start lets it go

log = logging.getLogger(__name__)


def render(registry: MetricsRegistry) -> str:
    """The registry in text format; starts a new max window for every timer (this is a scrape)."""
    lines: list[str] = []
    for family in registry.collect(reset_max=True):
        if family.kind == "timer":
            _render_timer(family, lines)
        else:
            _header(lines, family.name, family.doc, family.kind)
            for s in family.samples:
                assert isinstance(s, Sample)
                lines.append(_line(family.name, s.labels, s.value))
    return "".join(line + "\n" for line in lines)


def _render_timer(family: FamilySample, lines: list[str]) -> None:
    timers = [s for s in family.samples if isinstance(s, TimerSample)]
    _header(lines, family.name, family.doc, "summary")
    for t in timers:
        lines.append(_line(family.name + "_count", t.labels, t.count))
        lines.append(_line(family.name + "_sum", t.labels, t.sum_seconds))
    max_name = family.name + "_max"
    _header(lines, max_name, f"Maximum of {family.name} since the previous scrape, in seconds.", "gauge")
    for t in timers:
        lines.append(_line(max_name, t.labels, t.max_seconds))


def _header(lines: list[str], name: str, doc: str, prom_type: str) -> None:
    lines.append(f"# HELP {name} {escape_help(doc)}")
    lines.append(f"# TYPE {name} {prom_type}")


def _line(name: str, labels: Mapping[str, str], value: float) -> str:
    if not labels:
        return f"{name} {format_value(value)}"
    pairs = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
    return f"{name}{{{pairs}}} {format_value(value)}"


def escape_help(text: str) -> str:
    """HELP text escapes only backslash and newline."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_label_value(text: str) -> str:
    """Label values escape backslash, double quote and newline."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float) -> str:
    """Integers as written, floats by repr (exact round trip), specials as Prometheus spells them."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class _MetricsHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], registry: MetricsRegistry) -> None:
        self.registry = registry
        super().__init__(address, _MetricsHandler)


class _MetricsHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if urlsplit(self.path).path != METRICS_PATH:
            self._reply(404, b"not found: metrics are served at /metrics\n", "text/plain; charset=utf-8")
            return
        server = self.server
        assert isinstance(server, _MetricsHTTPServer)
        try:
            body = render(server.registry).encode("utf-8")
        except Exception:
            log.exception("rendering metrics failed")
            self._reply(
                500, b"rendering metrics failed; see the container log\n", "text/plain; charset=utf-8"
            )
            return
        self._reply(200, body, CONTENT_TYPE)

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError) as e:
            # A scraper that timed out and hung up (a busy container answers slowly): nothing to fix
            # here, and a traceback per abandoned scrape would bury the container's log.
            log.debug("metrics scrape from %s abandoned before the answer: %r", self.address_string(), e)

    def log_message(self, format: str, *args: object) -> None:
        # Scrapes every few seconds would flood stderr; keep them at debug level.
        log.debug("%s " + format, self.address_string(), *args)


class PrometheusServer:
    """Serves ``GET /metrics`` from a daemon thread; port 0 picks a free port (read it from ``port``)."""

    def __init__(self, registry: MetricsRegistry, port: int, host: str = "0.0.0.0", name: str = "") -> None:
        self._registry = registry
        self._host = host
        self._port = port
        self._name = name  # who serves, in the log line that tells scrapers the port
        self._server: _MetricsHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port once started (the real one when 0 was asked for), else the configured one."""
        return self._server.server_address[1] if self._server is not None else self._port

    def start(self, busy_wait_s: float = 0.0) -> None:
        """Binds and serves. A port in use is tried again for up to `busy_wait_s` (an older start of the
        same container, fenced, may still hold it while it stops) before `MetricsPortError`."""
        if self._server is not None:
            raise MetricsError(f"the metrics server on {self._host}:{self.port} is already started")
        deadline = time.monotonic() + busy_wait_s
        try:
            while True:
                try:
                    self._server = _MetricsHTTPServer((self._host, self._port), self._registry)
                    break
                except OSError as e:
                    if e.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                        raise
                    time.sleep(_BUSY_RETRY_S)
        except OSError as e:
            # Taken (EADDRINUSE) or privileged (EACCES): every restart meets the same port, so a config error.
            who = f"{self._name}: " if self._name else ""
            raise MetricsPortError(
                f"{who}cannot serve metrics on {self._host}:{self._port}: {e.strerror or e}; set "
                "metrics.prometheus.port to a free port (container N serves on that port + N), or to 0 "
                "for a free port per container (logged at start)"
            ) from e
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _POLL_INTERVAL_S},
            name=f"samsa-metrics-{self.port}",
            daemon=True,
        )
        self._thread.start()
        log.info(
            "%sserving metrics on http://%s:%d%s%s",
            f"{self._name}: " if self._name else "",
            self._host,
            self.port,
            METRICS_PATH,
            " (a free port: metrics.prometheus.port=0)" if self._port == 0 else "",
        )

    def stop(self) -> None:
        """Stop serving and free the port; safe to call twice or before ``start``."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
