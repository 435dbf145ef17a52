"""A fork server for container processes: a parent that imports the container runtime once (and warms
boto3's S3 models when the job backs stores up to S3), then forks each container the supervisor asks for.

A container started as a fresh interpreter imports Samsa, confluent-kafka, rocksdict and, for S3 jobs,
boto3 (about 0.3 s, plus 0.2 s for boto3 and its S3 client, of CPU) before its restore can begin; a
forked one starts with them loaded, and its S3 client is made in about 10 ms from the warmed models. Each
restart of a crashed container gains the same. The server stays single-threaded (it refuses to serve when
anything it imported started a thread, since a fork copies only the calling thread), runs no user code,
and exits when its supervisor's end of the socket closes: its containers, re-parented, then stop as
orphans of a killed supervisor do.

Protocol, one JSON message per datagram on a SOCK_SEQPACKET socket pair: the server says `ready` (or why
it cannot serve); the supervisor sends `spawn` with the container's output pipe as an attached descriptor;
the server answers `started` with the child's pid, and later `exited` with its exit status (as
`subprocess.Popen.returncode` gives it: negative for a signal).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from samsa.deploy.exceptions import ForkServerError

_MAX_MESSAGE = 1 << 20
# How long a spawn waits for the server's answer, and the server for its start.
_ANSWER_TIMEOUT_S = 30.0
_READY_TIMEOUT_S = 120.0


# -- the supervisor's side ---------------------------------------------------------------------------------
class ForkedProcess:
    """A container forked by the server, with the parts of `subprocess.Popen` the supervisor uses."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._exited = threading.Event()
        self._orphaned = False

    def _set_exit(self, status: int) -> None:
        if self.returncode is None:
            self.returncode = status
        self._exited.set()

    def _orphan(self) -> None:
        # The server is gone, and with it the exit status: the process, re-parented, stops on its own.
        self._orphaned = True

    def poll(self) -> int | None:
        if self.returncode is None and self._orphaned:
            status = _orphan_status(self.pid)
            if status is not None:
                self._set_exit(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.poll()
            if status is not None:
                return status
            left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(f"container process {self.pid}", timeout or 0.0)
            self._exited.wait(left)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # exited, its status on its way
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _orphan_status(pid: int) -> int | None:
    """The exit status of a container whose fork server is gone, None while it runs. Re-parented to this
    process (a supervisor running as pid 1, or a subreaper), it is reaped here with its own status;
    re-parented elsewhere, its status is lost with the server and counts as a crash (1) once it has
    exited (a zombie its new parent has not reaped yet counts as exited)."""
    try:
        reaped, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not this process's child
    else:
        return None if reaped == 0 else os.waitstatus_to_exitcode(status)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return 1
    except PermissionError:
        return 1  # the pid is another user's process now: ours is gone
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None  # no /proc: alive as far as can be told
    return 1 if state in ("Z", "X") else None


class ForkServer:
    """The supervisor's handle on a fork server process; `spawn` starts a container from it."""

    def __init__(self, preload: Sequence[str], warm_s3: bool, env: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = [sys.executable, "-m", "samsa.deploy.fork_server", "--fd", str(theirs.fileno())]
        for module in preload:
            command += ["--preload", module]
        if warm_s3:
            command.append("--warm-s3")
        try:
            # Its own session, as the containers: a terminal's Ctrl-C reaches only the supervisor.
            self._process = subprocess.Popen(
                command,
                pass_fds=(theirs.fileno(),),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._sock = ours
        self._lock = threading.Lock()  # one spawn at a time: the server answers in order
        self._state = threading.Condition()
        self._answers: list[dict[str, Any]] = []
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}  # exits read before their spawn took the pid
        self._ready: dict[str, Any] | None = None
        self._gone = False
        threading.Thread(target=self._read, name="fork-server-reader", daemon=True).start()

    @property
    def pid(self) -> int:
        """The server process's pid: the containers' parent."""
        return self._process.pid

    def wait_ready(self, timeout_s: float = _READY_TIMEOUT_S) -> None:
        """Waits until the server has loaded what it preloads; ForkServerError when it cannot serve."""
        with self._state:
            self._state.wait_for(lambda: self._ready is not None or self._gone, timeout_s)
            if self._ready is None:
                raise ForkServerError(
                    "the fork server exited before it was ready"
                    if self._gone
                    else f"the fork server was not ready within {timeout_s:.0f} s"
                )
            unsafe = self._ready.get("unsafe")
        if unsafe:
            raise ForkServerError(str(unsafe))

    def spawn(
        self,
        entry: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        sys_path: Sequence[str] = (),
        name: str = "",
    ) -> ForkedProcess:
        """Forks a process that calls `entry` ("module:function", its result the exit status) with
        `sys.argv[1:] = argv` and `env` added to its environment, named `samsa-c<name>` (`ps -e`); its
        stdout and stderr go to the returned process's `stdout`."""
        self.wait_ready()
        request = {
            "op": "spawn",
            "entry": entry,
            "argv": [*argv],
            "env": {**env},
            "path": [*sys_path],
            "name": name,
        }
        read_end, write_end = os.pipe()
        try:
            with self._lock:
                try:
                    socket.send_fds(self._sock, [json.dumps(request).encode()], [write_end])
                except OSError as e:
                    raise ForkServerError(f"the fork server is gone ({e})") from e
                finally:
                    os.close(write_end)  # the child holds it now: the pipe ends when the child does
                answer = self._answer()
            if answer["op"] != "started":
                raise ForkServerError(f"the fork server could not fork: {answer.get('error')}")
        except BaseException:
            os.close(read_end)
            raise
        process = ForkedProcess(int(answer["pid"]), os.fdopen(read_end, "rb"))
        with self._state:
            self._children[process.pid] = process
            early = self._early_exits.pop(process.pid, None)
            if early is not None:
                process._set_exit(early)
            elif self._gone:
                process._orphan()
        return process

    def _answer(self) -> dict[str, Any]:
        with self._state:
            if not self._state.wait_for(lambda: self._answers or self._gone, _ANSWER_TIMEOUT_S):
                raise ForkServerError(f"the fork server did not answer within {_ANSWER_TIMEOUT_S:.0f} s")
            if not self._answers:
                raise ForkServerError("the fork server exited")
            return self._answers.pop(0)

    def _read(self) -> None:
        try:
            while True:
                data = self._sock.recv(_MAX_MESSAGE)
                if not data:
                    break
                message = json.loads(data)
                with self._state:
                    op = message["op"]
                    if op == "ready":
                        self._ready = message
                    elif op == "exited":
                        pid, status = int(message["pid"]), int(message["status"])
                        child = self._children.pop(pid, None)
                        if child is None:
                            self._early_exits[pid] = status
                        else:
                            child._set_exit(status)
                    else:
                        self._answers.append(message)
                    self._state.notify_all()
        except OSError:
            pass  # closed by close()
        finally:
            self._process.poll()  # reaped if it died (a zombie otherwise, for as long as the supervisor runs)
            with self._state:
                self._gone = True
                for child in self._children.values():
                    child._orphan()
                self._state.notify_all()

    @property
    def gone(self) -> bool:
        """The server has exited (or was closed): spawns fail."""
        return self._gone

    def close(self) -> None:
        """Ends the server; containers still running are re-parented and stop on their own."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            # At once when it serves; a server still loading (a job refused meanwhile) ends once loaded.
            self._process.wait(timeout=_READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


# -- the server's side ---------------------------------------------------------------------------------------
def _threads() -> int:
    """Threads of this process, the native ones included (Linux); Python's count elsewhere."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _preload(modules: Sequence[str], warm_s3: bool) -> str | None:
    """Imports `modules` (and warms boto3's S3 models); why forking would be unsafe after it, or None."""
    for module in modules:
        importlib.import_module(module)
    if warm_s3:
        from samsa.stores.blobstore.s3 import warm_models

        warm_models()
    # What was loaded stays out of the collector's scans: a collection in a container would otherwise write
    # to (and so copy) the server's pages it shares.
    gc.freeze()
    threads = _threads()
    if threads > 1:
        return (
            f"the fork server has {threads} threads after loading {', '.join(modules) or 'nothing'}"
            f"{' and warming S3' if warm_s3 else ''}; forking it would copy only one"
        )
    return None


def _serve(sock: socket.socket) -> int | None:
    """Forks a child per spawn request until the supervisor closes its end; returns None there. In a
    child, runs its entry and never returns (SystemExit with the entry's status)."""
    # A stop reaches every process of a job at once (systemd's control-group kill, `kill -TERM -<pgid>`):
    # the server outlives its containers so that their exit statuses reach the supervisor; it ends when the
    # supervisor closes its end.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes select through the wakeup fd
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            _send(sock, {"op": "exited", "pid": pid, "status": os.waitstatus_to_exitcode(status)})
        if sock.fileno() not in readable:
            continue
        data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 1)
        if not data:
            return None
        if not fds:
            _send(sock, {"op": "failed", "error": "a spawn request came without the output pipe"})
            continue
        request = json.loads(data)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as e:
            os.close(fds[0])
            _send(sock, {"op": "failed", "error": str(e)})
            continue
        if pid == 0:
            sock.close()
            os.close(wake_read)
            os.close(wake_write)
            _child(request, fds[0])
        os.close(fds[0])
        children.add(pid)
        _send(sock, {"op": "started", "pid": pid})


def _child(request: dict[str, Any], output: int) -> None:
    """In a forked child: becomes the container's process, as a fresh interpreter would be, and runs it."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh interpreter has them
    os.setsid()
    with contextlib.suppress(OSError):  # its name in `ps -e`, `top`: its command line is the server's
        Path("/proc/self/comm").write_text(f"samsa-c{request.get('name', '')}"[:15])
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    os.environ.update(request["env"])
    sys.path[:0] = request["path"]
    module, _, function = request["entry"].partition(":")
    sys.argv = [module, *request["argv"]]
    entry = getattr(importlib.import_module(module), function)
    raise SystemExit(entry())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Samsa's fork server (started by the local supervisor)")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--preload", action="append", default=[])
    parser.add_argument("--warm-s3", action="store_true")
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    try:
        unsafe = _preload(args.preload, args.warm_s3)
    except Exception as e:  # told to the supervisor, which starts fresh interpreters instead
        unsafe = f"the fork server could not load its modules: {type(e).__name__}: {e}"
    server = os.getpid()
    try:
        _send(sock, {"op": "ready", "pid": server, "unsafe": unsafe})
        if unsafe:
            return 1
        _serve(sock)  # returns in this process only; a child leaves through SystemExit
    except (BrokenPipeError, ConnectionResetError):
        if os.getpid() != server:
            raise  # a child's own error, raised through here as in a fresh interpreter
        # The supervisor is gone or done (a job refused while this server loaded): nothing to serve.
    return 0


if __name__ == "__main__":
    sys.exit(main())
