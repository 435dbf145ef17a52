"""The driver-to-container control channel: epochs, heartbeats with state, and stop/fence orders over TCP."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from hashlib import sha256
from typing import Any

from samsa.deploy.exceptions import ControlError, ControlProtocolError

log = logging.getLogger(__name__)

STATES = ("starting", "restoring", "running", "stopping", "stopped", "failed")
_FINAL_STATES = ("stopped", "failed")

# Messages are small: state, progress, a short error text, a few ids. A longer line is a garbled peer.
_MAX_LINE = 16 * 1024
_MAX_DETAIL = 2000
# Every socket operation is bounded; a peer that stalls longer than this is dropped (or retried, client side).
_IO_TIMEOUT_S = 5.0
# A hello must follow the nonce promptly: port scanners and garbage senders must not hold threads.
_HELLO_TIMEOUT_S = 5.0
# A container sends a poll every interval (a fraction of a second); one silent this long is dropped and
# reconnects with its epoch if it is still alive.
_IDLE_TIMEOUT_S = 60.0
# How often the accept loop looks at the close flag when shutdown() does not wake it (non-Linux).
_ACCEPT_POLL_S = 0.2
_JOIN_TIMEOUT_S = 2.0
_CONNECT_BACKOFF_START_S = 0.05
_CONNECT_BACKOFF_MAX_S = 1.0


def new_secret() -> str:
    """A fresh secret for one run of a job: containers of another run cannot join this driver."""
    return secrets.token_hex(32)


def _mac(secret: str, nonce: str, container_id: str, epoch: int | None) -> str:
    parts = [nonce, container_id] if epoch is None else [nonce, container_id, str(epoch)]
    return hmac.new(secret.encode(), "\n".join(parts).encode(), sha256).hexdigest()


@dataclass
class ContainerReport:
    """What the driver knows of one container: its latest epoch and the state it last reported."""

    container_id: str
    epoch: int
    state: str
    progress: float | None
    host: str
    pid: int
    info: dict[str, Any]
    detail: str
    last_seen: float
    #: A failed container's exit status when a restart cannot mend its failure (`unmendable_exit`).
    exit_status: int | None = None


class _Line:
    """One TCP connection carrying newline-delimited JSON objects, every operation bounded in time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()

    def send(self, message: Mapping[str, Any], timeout_s: float = _IO_TIMEOUT_S) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        if len(data) > _MAX_LINE:
            raise ControlProtocolError(f"control message of {len(data)} bytes is over {_MAX_LINE} bytes")
        self.sock.settimeout(timeout_s)
        self.sock.sendall(data)

    def recv(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            if len(self._buf) > _MAX_LINE:
                raise ControlProtocolError(f"control line over {_MAX_LINE} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no control message within {timeout_s:.1f} s")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the peer closed the control connection")
            self._buf += chunk
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        if len(line) > _MAX_LINE:
            raise ControlProtocolError(f"control line over {_MAX_LINE} bytes")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise ControlProtocolError(f"control line is not JSON: {e}") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ControlProtocolError("control message is not an object with a type")
        return message

    def shutdown(self) -> None:
        # Wakes a thread blocked in recv on this socket (close alone does not).
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.sock.close()


def _str(message: Mapping[str, Any], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str):
        raise ControlProtocolError(f"control message field {name!r} must be a string")
    return value


def _int(message: Mapping[str, Any], name: str) -> int:
    value = message.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ControlProtocolError(f"control message field {name!r} must be an integer")
    return value


def _exit_status(message: Mapping[str, Any]) -> int | None:
    return None if message.get("exit") is None else _int(message, "exit")


def _state(message: Mapping[str, Any], allowed: tuple[str, ...] = STATES) -> str:
    state = _str(message, "state")
    if state not in allowed:
        raise ControlProtocolError(f"control message state {state!r} is not one of {allowed}")
    return state


def _progress(message: Mapping[str, Any]) -> float | None:
    value = message.get("progress")
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ControlProtocolError("control message field 'progress' must be a number or null")
    return min(1.0, max(0.0, float(value)))


@dataclass
class _Session:
    """A connection's container, once its hello was accepted."""

    container_id: str
    epoch: int


class ControlServer:
    """The driver's end: issues epochs, records each container's reports, answers polls ok/stop/fenced."""

    def __init__(
        self,
        secret: str,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._secret = secret
        self._bind = (host, port)
        self._clock = clock
        self._cond = threading.Condition()
        self._epochs: dict[str, int] = {}
        self._reports: dict[str, ContainerReport] = {}
        #: Containers whose fresh start was refused because the job was stopping: they never ran.
        self._refused: set[str] = set()
        self._conns: dict[_Line, str | None] = {}
        self._threads: list[threading.Thread] = []
        # A plain bool: request_stop() runs in signal handlers, where taking a lock could deadlock.
        self._stop_requested = False
        self._closed = threading.Event()
        self._listener: socket.socket | None = None
        self._address: tuple[str, int] | None = None
        self._acceptor: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) containers connect to; valid after start() (and still read after close())."""
        if self._address is None:
            raise ControlError("the control server has no address before start()")
        return self._address

    def start(self) -> None:
        """Listens and accepts containers on a daemon thread, one more thread per connection."""
        self._listener = socket.create_server(self._bind)
        self._listener.settimeout(_ACCEPT_POLL_S)
        host, port = self._listener.getsockname()[:2]
        self._address = str(host), int(port)
        self._acceptor = threading.Thread(target=self._accept_loop, name="samsa-control-accept", daemon=True)
        self._acceptor.start()
        log.info("control server listening on %s:%d", *self.address)

    def request_stop(self) -> None:
        """From now on every poll is answered STOP and fresh containers are refused (signal-handler safe)."""
        self._stop_requested = True

    def resume(self) -> None:
        """Undoes request_stop() once every container it stopped has ended: polls are answered ok and fresh
        containers welcome again (a new job model's). Their reports are dropped; epochs go on counting, and a
        container of the stopped model reconnecting with its epoch is answered fenced."""
        with self._cond:
            self._stop_requested = False
            self._reports.clear()
            self._refused.clear()
            self._cond.notify_all()

    def refused_while_stopping(self, container_id: str) -> bool:
        """Whether a fresh start of the container was refused because the job was stopping (since the last
        `resume`): such an attempt never ran, so its task's failure cost nothing."""
        with self._cond:
            return container_id in self._refused

    @property
    def stopping(self) -> bool:
        return self._stop_requested

    def reports(self) -> dict[str, ContainerReport]:
        """A copy of the latest report of each container, keyed by container id."""
        with self._cond:
            return self._copy_reports()

    def epoch_of(self, container_id: str) -> int | None:
        """The current (highest issued) epoch of a container, None before its first hello."""
        with self._cond:
            return self._epochs.get(container_id)

    def wait_until(self, predicate: Callable[[dict[str, ContainerReport]], bool], timeout_s: float) -> bool:
        """Waits until predicate(reports) is true, re-checked on every update; False after timeout_s."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self._copy_reports()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def disconnect(self, container_id: str) -> int:
        """Drops the connections of a container (it reconnects with its epoch if alive); returns how many."""
        with self._cond:
            conns = [c for c, cid in self._conns.items() if cid == container_id]
        for conn in conns:
            conn.shutdown()
        return len(conns)

    def close(self) -> None:
        """Stops accepting, closes every connection and joins the threads (bounded)."""
        self._closed.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes accept() at once on Linux
                self._listener.shutdown(socket.SHUT_RDWR)
        if self._acceptor is not None:
            self._acceptor.join(_JOIN_TIMEOUT_S)
        if self._listener is not None:
            self._listener.close()
        with self._cond:
            conns = list(self._conns)
            threads = list(self._threads)
        for conn in conns:
            conn.shutdown()
        deadline = time.monotonic() + _JOIN_TIMEOUT_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _copy_reports(self) -> dict[str, ContainerReport]:
        return {cid: replace(r, info=dict(r.info)) for cid, r in self._reports.items()}

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._closed.is_set():
                    log.exception("control server stopped accepting connections")
                return
            conn = _Line(sock)
            thread = threading.Thread(
                target=self._serve, args=(conn, peer), name="samsa-control-conn", daemon=True
            )
            with self._cond:
                if self._closed.is_set():
                    conn.close()
                    return
                self._conns[conn] = None
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: _Line, peer: Any) -> None:
        try:
            nonce = secrets.token_hex(16)
            conn.send({"type": "nonce", "nonce": nonce})
            session = self._hello(conn, conn.recv(_HELLO_TIMEOUT_S), nonce)
            while session is not None and not self._closed.is_set():
                session = self._handle(conn, session, conn.recv(_IDLE_TIMEOUT_S))
        except (OSError, ControlProtocolError) as e:
            if not self._closed.is_set():
                log.info("dropped control connection from %s: %s", peer, e)
        except Exception:
            log.exception("dropped control connection from %s after an unexpected error", peer)
        finally:
            with self._cond:
                self._conns.pop(conn, None)
            conn.close()

    def _hello(self, conn: _Line, hello: dict[str, Any], nonce: str) -> _Session | None:
        if hello["type"] != "hello":
            raise ControlProtocolError(f"expected a hello, got {hello['type']!r}")
        container_id = _str(hello, "container_id")
        epoch = None if hello.get("epoch") is None else _int(hello, "epoch")
        if not hmac.compare_digest(_str(hello, "mac"), _mac(self._secret, nonce, container_id, epoch)):
            log.warning("refused container %s: authentication failed (wrong secret)", container_id)
            conn.send({"type": "refused", "reason": "authentication failed"})
            return None
        host, pid, info = _str(hello, "host"), _int(hello, "pid"), hello.get("info", {})
        if not isinstance(info, dict):
            raise ControlProtocolError("control hello field 'info' must be an object")
        with self._cond:
            current = self._epochs.get(container_id)
            if epoch is None and self._stop_requested:
                reply: dict[str, Any] = {"type": "refused", "reason": "job stopping"}
                self._refused.add(container_id)
            elif epoch is None:
                epoch = (current or 0) + 1
                self._epochs[container_id] = epoch
                self._reports[container_id] = ContainerReport(
                    container_id, epoch, "starting", None, host, pid, info, "", self._clock()
                )
                reply = {"type": "welcome", "epoch": epoch}
            elif epoch != current or container_id not in self._reports:
                # Not current, or of a job model the driver replaced since (`resume`): stop, no commit.
                reply = {"type": "fenced", "epoch": current}
            else:
                self._reports[container_id].last_seen = self._clock()
                reply = {"type": "welcome", "epoch": epoch}
            if reply["type"] == "welcome":
                self._conns[conn] = container_id
            self._cond.notify_all()
        conn.send(reply)
        if reply["type"] != "welcome":
            log.info("answered hello of container %s (epoch %s) with %s", container_id, epoch, reply)
            return None
        assert epoch is not None
        return _Session(container_id, epoch)

    def _handle(self, conn: _Line, session: _Session, message: dict[str, Any]) -> _Session | None:
        kind = message["type"]
        exit_status = None
        if kind == "poll":
            state, progress, detail = _state(message), _progress(message), None
        elif kind == "close":
            state, progress, detail = _state(message, _FINAL_STATES), None, _str(message, "detail")
            exit_status = _exit_status(message)
        else:
            raise ControlProtocolError(f"unexpected control message type {kind!r}")
        with self._cond:
            report = self._reports.get(session.container_id)
            if report is None or report.epoch != session.epoch:
                reply = "fenced"
            else:
                report.state, report.progress, report.last_seen = state, progress, self._clock()
                if detail is not None:
                    report.detail = detail[:_MAX_DETAIL]
                    report.exit_status = exit_status
                reply = "stop" if self._stop_requested else "ok"
                self._cond.notify_all()
        if kind == "close":
            conn.send({"type": "bye"})
            return None
        conn.send({"type": reply})
        return session


class ControlClient:
    """A container's end: joins the driver for an epoch, then heartbeats its state and learns when to stop."""

    def __init__(
        self,
        address: tuple[str, int],
        secret: str,
        container_id: str,
        *,
        host: str,
        pid: int,
        info: Mapping[str, Any] | None = None,
        interval_s: float = 0.25,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._address = (address[0], int(address[1]))
        self._secret = secret
        self._container_id = container_id
        self._host = host
        self._pid = pid
        self._info = dict(info or {})
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._io_timeout_s = min(_IO_TIMEOUT_S, timeout_s)
        self._clock = clock
        self._epoch: int | None = None
        self._conn: _Line | None = None
        # Held around every use of the connection: the heartbeat thread and close() share it.
        self._io_lock = threading.Lock()
        self._closing = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stop_reason: str | None = None
        # The hello must fit in one control line; ASCII-escaped JSON bounds its UTF-8 size.
        size = len(json.dumps([container_id, host, self._info]))
        if size > _MAX_LINE // 2:
            raise ValueError(
                f"container id, host and info of container {container_id} take {size} bytes as JSON; "
                f"keep them under {_MAX_LINE // 2} bytes"
            )

    @property
    def epoch(self) -> int | None:
        """The epoch the driver issued to this container, None before connect()."""
        return self._epoch

    def _where(self) -> str:
        return f"{self._address[0]}:{self._address[1]}"

    def connect(self, timeout_s: float = 30.0) -> int:
        """Says hello to the driver, retrying until timeout_s; returns the epoch the driver issued."""
        deadline = time.monotonic() + timeout_s
        delay = _CONNECT_BACKOFF_START_S
        while True:
            try:
                conn, reply = self._handshake(None, min(self._io_timeout_s, max(0.05, timeout_s)))
                break
            except (OSError, ControlProtocolError) as e:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ControlError(
                        f"cannot reach the driver's control channel at {self._where()} for container "
                        f"{self._container_id} within {timeout_s:.1f} s ({e}); check that the driver runs "
                        f"and that this host can reach it (spark.driver.host, firewalls)"
                    ) from e
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, _CONNECT_BACKOFF_MAX_S)
        if reply["type"] == "welcome":
            with self._io_lock:
                self._conn, self._epoch = conn, _int(reply, "epoch")
            log.info(
                "container %s joined the driver at %s as epoch %d",
                self._container_id,
                self._where(),
                self._epoch,
            )
            return self._epoch
        conn.close()
        reason = reply.get("reason")
        if reason == "job stopping":
            raise ControlError(
                f"the driver at {self._where()} is stopping the job and refused container "
                f"{self._container_id}: a container started while the job stops must not run"
            )
        raise ControlError(
            f"the driver at {self._where()} refused container {self._container_id}: {reason}; the "
            f"container's control secret must be the one of the driver's current run"
        )

    def _handshake(self, epoch: int | None, timeout_s: float) -> tuple[_Line, dict[str, Any]]:
        conn = _Line(socket.create_connection(self._address, timeout=timeout_s))
        try:
            greeting = conn.recv(timeout_s)
            if greeting["type"] != "nonce":
                raise ControlProtocolError(f"expected a nonce from the driver, got {greeting['type']!r}")
            hello: dict[str, Any] = {
                "type": "hello",
                "container_id": self._container_id,
                "mac": _mac(self._secret, _str(greeting, "nonce"), self._container_id, epoch),
                "host": self._host,
                "pid": self._pid,
                "info": self._info,
            }
            if epoch is not None:
                hello["epoch"] = epoch
            conn.send(hello, timeout_s)
            reply = conn.recv(timeout_s)
            if reply["type"] not in ("welcome", "refused", "fenced"):
                raise ControlProtocolError(f"unexpected reply to a hello: {reply['type']!r}")
            return conn, reply
        except BaseException:
            conn.close()
            raise

    def start(self, status: Callable[[], tuple[str, float | None]], on_stop: Callable[[str], None]) -> None:
        """Heartbeats status() every interval on a daemon thread; calls on_stop(reason) once.

        reason is "stop" (the driver asked), "fenced" (a newer epoch of this container runs) or "lost" (no
        exchange with the driver for timeout_s; the client keeps reconnecting with its epoch meanwhile).
        """
        if self._epoch is None:
            raise ControlError(f"container {self._container_id} must connect() before start()")
        self._thread = threading.Thread(
            target=self._run, args=(status, on_stop), name="samsa-control-client", daemon=True
        )
        self._thread.start()

    def _run(self, status: Callable[[], tuple[str, float | None]], on_stop: Callable[[str], None]) -> None:
        last_ok = self._clock()
        while not self._closing.is_set():
            state, progress = self._status(status)
            with self._io_lock:
                if self._closing.is_set():
                    return
                reply = self._exchange(state, progress)
            now = self._clock()
            if reply is not None:
                last_ok = now
            if reply in ("stop", "fenced"):
                self._fire(on_stop, reply)
            elif reply is None and now - last_ok >= self._timeout_s:
                self._fire(on_stop, "lost")
            self._closing.wait(self._interval_s)

    def _status(self, status: Callable[[], tuple[str, float | None]]) -> tuple[str, float | None]:
        try:
            state, progress = status()
        except Exception:
            log.exception("status() of container %s failed; reporting it as running", self._container_id)
            state, progress = "running", None
        if state not in STATES:
            log.warning("container %s reported unknown state %r; sending running", self._container_id, state)
            state, progress = "running", None
        # Once told to stop, the driver sees "stopping" until the container says it stopped.
        if self._stop_reason is not None and state not in ("stopping", *_FINAL_STATES):
            state, progress = "stopping", None
        return state, progress

    def _fire(self, on_stop: Callable[[str], None], reason: str) -> None:
        if self._stop_reason is not None:
            return
        self._stop_reason = reason
        log.debug("container %s (epoch %s) stops: %s", self._container_id, self._epoch, reason)
        try:
            on_stop(reason)
        except Exception:
            log.exception("on_stop(%r) of container %s failed", reason, self._container_id)

    def _exchange(self, state: str, progress: float | None) -> str | None:
        """One poll and its reply ("ok", "stop" or "fenced"); None when the driver could not be reached."""
        try:
            if self._conn is None:
                fenced = self._reconnect()
                if fenced:
                    return "fenced"
            assert self._conn is not None
            self._conn.send({"type": "poll", "state": state, "progress": progress}, self._io_timeout_s)
            reply = _str(self._conn.recv(self._io_timeout_s), "type")
            if reply not in ("ok", "stop", "fenced"):
                raise ControlProtocolError(f"unexpected reply to a poll: {reply!r}")
            return reply
        except (OSError, ControlProtocolError) as e:
            log.info("container %s lost the driver at %s: %s", self._container_id, self._where(), e)
            self._drop()
            return None

    def _reconnect(self) -> bool:
        """A hello with this container's epoch; True when the driver says the epoch is fenced."""
        conn, reply = self._handshake(self._epoch, self._io_timeout_s)
        if reply["type"] == "welcome" and reply.get("epoch") == self._epoch:
            self._conn = conn
            log.info("container %s reconnected to the driver as epoch %s", self._container_id, self._epoch)
            return False
        conn.close()
        if reply["type"] == "fenced":
            return True
        raise ControlProtocolError(f"the driver refused the reconnect: {reply}")

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self, state: str = "stopped", detail: str = "", exit_status: int | None = None) -> None:
        """Best-effort final report (stopped or failed, with detail, and the exit status of a failure that
        a restart cannot mend), then closes and joins the thread."""
        if state not in _FINAL_STATES:
            raise ValueError(f"a container closes as one of {_FINAL_STATES}, not {state!r}")
        self._closing.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(2 * self._io_timeout_s + self._interval_s)
        with self._io_lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._conn is None and self._epoch is not None and self._reconnect():
                    return
                if self._conn is not None:
                    message = {
                        "type": "close",
                        "state": state,
                        "detail": detail[:_MAX_DETAIL],
                        "exit": exit_status,
                    }
                    self._conn.send(message, self._io_timeout_s)
                    self._conn.recv(self._io_timeout_s)
            except (OSError, ControlProtocolError) as e:
                log.info(
                    "container %s could not send its final state to the driver: %s", self._container_id, e
                )
            finally:
                self._drop()
