"""Dev/test Kafka broker: runs the noida-db binary (PyPI `noida-db`) with only its Kafka service."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from samsa.kafka.admin import KafkaAdmin
from samsa.kafka.exceptions import BrokerStartError, KafkaSystemError

_LOG_NAME = "samsa-broker.log"
_STOP_GRACE_S = 10.0
_READY_POLL_S = 0.05
_LOG_TAIL_CHARS = 4000


def noida_binary() -> Path:
    """Path of the noida-db executable shipped inside the noida_db package."""
    spec = importlib.util.find_spec("noida_db")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerStartError(
            "The dev broker needs the noida-db package: pip install 'noida-db==0.2.3' (or samsa[dev]), "
            "or point KAFKA_BOOTSTRAP at a running broker."
        )
    binary = Path(next(iter(spec.submodule_search_locations))) / "noida-db"
    if not binary.is_file():
        raise BrokerStartError(f"noida-db binary not found at {binary}; reinstall noida-db==0.2.3")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)  # wheels do not always keep the executable bit
    return binary


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn (Linux only) that makes the broker get SIGTERM when the thread that started it dies,
    so a killed test run leaves no broker behind."""
    if sys.platform != "linux":
        return None
    import ctypes

    # Resolved in the parent: the child, forked from a process with librdkafka threads, only calls it.
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM)

    return hook


class EmbeddedBroker:
    """A local single-node Kafka broker for development and tests; a context manager."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        start_timeout: float = 30.0,
    ) -> None:
        self._owns_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._fixed_port = port
        self._port = port
        self._host = host
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self._port is None or self._proc is None:
            raise BrokerStartError("The embedded broker is not started; call start() first")
        return f"{self._host}:{self._port}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise BrokerStartError("The embedded broker has no data dir before start()")
        return self._data_dir

    @property
    def log_path(self) -> Path:
        return self.data_dir / _LOG_NAME

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers metadata requests."""
        if self._proc is not None:
            return self
        binary = noida_binary()
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="samsa-broker-"))
        self._data_dir.mkdir(parents=True, exist_ok=True)
        # An auto-picked port can be taken between picking and binding: try a few.
        attempts = 1 if self._fixed_port is not None else 3
        for attempt in range(attempts):
            self._port = self._fixed_port or free_port(self._host)
            try:
                self._launch(binary)
                return self
            except BrokerStartError:
                self._kill()
                if attempt == attempts - 1:
                    self.stop()  # the error carries the log tail; drop a temp dir we made
                    raise
        return self

    def _launch(self, binary: Path) -> None:
        cmd = [str(binary), "start", "--data-dir", str(self.data_dir), "--host", self._host]
        cmd += ["--only", "kafka", "--kafka-port", str(self._port)]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent_hook(),
            )
        self._await_ready()

    def _await_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self._start_timeout
        # log_level 0: "connection refused" until the broker listens is expected, not worth a log line.
        admin = KafkaAdmin({"bootstrap.servers": f"{self._host}:{self._port}", "log_level": 0}, timeout=1.0)
        while True:
            if self._proc.poll() is not None:
                raise BrokerStartError(
                    f"noida-db exited with code {self._proc.returncode} before it was ready "
                    f"(port {self._port}, data dir {self.data_dir}). Log tail:\n{self.log_tail()}"
                )
            try:
                admin.metadata(timeout=1.0)
                return
            except KafkaSystemError:
                if time.monotonic() > deadline:
                    raise BrokerStartError(
                        f"noida-db did not answer on {self._host}:{self._port} within {self._start_timeout}s "
                        f"(data dir {self.data_dir}). Log tail:\n{self.log_tail()}"
                    ) from None
                time.sleep(_READY_POLL_S)

    def log_tail(self) -> str:
        """The end of the broker's log (a 'GLIBC_2.39 not found' line at start is harmless)."""
        try:
            return self.log_path.read_text(errors="replace")[-_LOG_TAIL_CHARS:]
        except OSError as e:
            return f"<no log at {self.log_path}: {e}>"

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; removes the data dir if this object created it."""
        self._kill()
        if self._owns_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def wait(self) -> int:
        """Block until the broker process exits; its exit code."""
        if self._proc is None:
            raise BrokerStartError("The embedded broker is not started")
        return self._proc.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m samsa.kafka.embedded`: run a broker in the foreground until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m samsa.kafka.embedded", description=__doc__)
    parser.add_argument(
        "--data-dir", help="where the broker keeps its data (default: a temp dir, removed at exit)"
    )
    parser.add_argument("--port", type=int, help="Kafka port (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--start-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)

    broker = EmbeddedBroker(args.data_dir, args.port, args.host, args.start_timeout)

    def _stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        broker.start()
        print(broker.bootstrap_servers, flush=True)
        code = broker.wait()
        print(f"noida-db exited with code {code}. Log tail:\n{broker.log_tail()}", file=sys.stderr)
        return 1
    except BrokerStartError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
