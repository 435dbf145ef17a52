"""A fault-injecting HTTP reverse proxy for S3 tests: a seeded share of requests fail, the rest pass as is.

Faults, drawn per request with a seeded RNG: `500` (S3 `InternalError`) and `503` (`SlowDown`) answered by
the proxy without forwarding; `stall` (the request is read, then no answer until well past the client's
read timeout, then the connection is closed); `cut` (forwarded, then the answer is broken off halfway
through its body, or before its head when it has none). Everything else is forwarded unchanged, streamed
both ways: request bodies sized by Content-Length or chunked (framing and trailers passed through as
sent), the Host header kept (SigV4 signs it), after `latency_s` (a remote store's round trip; default 0).
`Expect: 100-continue` is answered by the proxy, and only for requests it forwards or stalls, as S3 does.
`targets` confines the faults to some requests (say S3's tagging requests only), so that an outage lands in
one phase of the client's work and no other.

Import the fixture into a conftest next to moto's: `from faulty_proxy import faulty_s3_endpoint`.
"""

from __future__ import annotations

import http.client
import random
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

FAULT_KINDS = ("500", "503", "stall", "cut")
_PIECE = 64 * 1024
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "upgrade", "expect", "transfer-encoding"}
)
_ERRORS = {
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "SlowDown", "Please reduce your request rate."),
}


class FaultyProxy:
    """The proxy in front of `upstream` (http://host:port); `fraction` may be changed at any time."""

    def __init__(
        self,
        upstream: str,
        fraction: float = 0.1,
        *,
        seed: int = 20240601,
        stall_s: float = 1.5,
        kinds: tuple[str, ...] = FAULT_KINDS,
        latency_s: float = 0.0,
    ) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.fraction = fraction
        self.stall_s = stall_s
        self.kinds = kinds
        self.latency_s = latency_s
        #: Which requests a fault may hit, by (method, path with query), e.g. only S3 tagging requests;
        #: None: any. May be changed at any time, like `fraction`.
        self.targets: Callable[[str, str], bool] | None = None
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._injected: Counter[str] = Counter()
        self._forwarded = 0
        self._forced: list[str] = []
        self.stopping = threading.Event()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="faulty-proxy", daemon=True
        )

    def start(self) -> FaultyProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes stalled requests
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FaultyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def injected(self) -> Counter[str]:
        """Faults injected so far, by kind."""
        with self._lock:
            return Counter(self._injected)

    @property
    def forwarded(self) -> int:
        """Requests forwarded upstream (a `cut` one included)."""
        with self._lock:
            return self._forwarded

    def fail_next(self, count: int, kind: str) -> None:
        """Injects `kind` into the next `count` requests, whatever the fraction."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {FAULT_KINDS}")
        with self._lock:
            self._forced.extend([kind] * count)

    def draw(self, method: str, path: str) -> str | None:
        """The fault for a request (None: forward it), drawn unless `targets` spares the request."""
        with self._lock:
            targets = self.targets
            if targets is not None and not targets(method, path):
                return None
            if self._forced:
                kind = self._forced.pop(0)
            elif self._rng.random() >= self.fraction:
                return None
            else:
                kind = self._rng.choice(self.kinds)
            self._injected[kind] += 1
            return kind

    def count_forwarded(self) -> None:
        with self._lock:
            self._forwarded += 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: FaultyProxy) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.proxy = proxy

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients dropping connections mid-request (timeouts after a stall) are expected here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def handle_expect_100(self) -> bool:
        return True  # answered later, once we know whether the request is forwarded

    def do_GET(self) -> None:
        self._handle()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    @property
    def proxy(self) -> FaultyProxy:
        assert isinstance(self.server, _Server)
        return self.server.proxy

    def _handle(self) -> None:
        fault = self.proxy.draw(self.command, self.path)
        if fault in _ERRORS:
            if not self._expects_continue():  # else the client waits for us and sends no body
                self._copy_body(None)
            self._send_error(*_ERRORS[fault])
        elif fault == "stall":
            self._continue()
            self._copy_body(None)
            self.proxy.stopping.wait(self.proxy.stall_s)
            self.close_connection = True
        else:
            if self.proxy.latency_s:
                self.proxy.stopping.wait(self.proxy.latency_s)  # a remote store's round trip
            self._forward(cut=fault == "cut")

    def _expects_continue(self) -> bool:
        return self.headers.get("Expect", "").lower() == "100-continue"

    def _continue(self) -> None:
        if self._expects_continue():
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()

    def _send_error(self, status: int, code: str, message: str) -> None:
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            "<RequestId>faulty-proxy</RequestId></Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True

    def _copy_body(self, out: Callable[[bytes], object] | None) -> None:
        """Reads the request body, passing its bytes exactly as sent (chunk framing included) to `out`."""
        send = out or (lambda data: None)
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._copy_chunked(send)
            return
        self._copy_exactly(int(self.headers.get("Content-Length") or 0), send)

    def _copy_exactly(self, size: int, send: Callable[[bytes], object]) -> None:
        while size > 0:
            piece = self.rfile.read(min(size, _PIECE))
            if not piece:
                raise ConnectionError("client closed the connection mid-body")
            send(piece)
            size -= len(piece)

    def _copy_chunked(self, send: Callable[[bytes], object]) -> None:
        while True:
            line = self.rfile.readline(65537)
            send(line)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                break
            self._copy_exactly(size + 2, send)  # the data and its CRLF
        while True:  # trailers, up to the empty line
            line = self.rfile.readline(65537)
            send(line)
            if line in (b"\r\n", b"\n", b""):
                return

    def _forward(self, cut: bool) -> None:
        upstream = http.client.HTTPConnection(*self.proxy.upstream, timeout=60)
        try:
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    upstream.putheader(name, value)
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                upstream.putheader("Transfer-Encoding", self.headers["Transfer-Encoding"])
            upstream.endheaders()
            self._continue()
            self._copy_body(upstream.send)
            response = upstream.getresponse()
            self.proxy.count_forwarded()
            self._relay(response, cut)
        finally:
            upstream.close()

    def _relay(self, response: http.client.HTTPResponse, cut: bool) -> None:
        no_body = self.command == "HEAD" or response.status in (204, 304)
        length = response.getheader("Content-Length")
        if cut and (no_body or not length or int(length) == 0):
            self.close_connection = True  # nothing to break off halfway: drop the answer whole
            return
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        chunked = not no_body and length is None
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if no_body:
            return
        budget = int(length) // 2 if cut and length else None
        while piece := response.read(_PIECE):
            if budget is not None:
                piece = piece[:budget]
                budget -= len(piece)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if budget == 0:
                self.wfile.flush()
                self.close_connection = True
                return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def faulty_s3_endpoint(moto_endpoint: str) -> Iterator[Callable[..., FaultyProxy]]:
    """Factory `(fraction=0.1, *, seed=..., stall_s=1.5, kinds=FAULT_KINDS) -> FaultyProxy` in front of
    the session's moto server (use `.url` as the endpoint, `.injected` to count faults); stopped after."""
    started: list[FaultyProxy] = []

    def start(fraction: float = 0.1, **options: object) -> FaultyProxy:
        proxy = FaultyProxy(moto_endpoint, fraction, **options).start()  # type: ignore[arg-type]
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()
