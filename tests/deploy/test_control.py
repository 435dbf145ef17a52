"""The driver-container control channel over real sockets: epochs, fencing, stop, lost driver, bad peers."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from samsa.deploy.control import ControlClient, ControlServer, new_secret
from samsa.deploy.exceptions import ControlError

INTERVAL = 0.02


class Stops:
    """Records on_stop calls."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.event = threading.Event()

    def __call__(self, reason: str) -> None:
        self.reasons.append(reason)
        self.event.set()

    def wait(self, timeout: float = 5.0) -> str:
        assert self.event.wait(timeout), "on_stop was not called"
        return self.reasons[0]


class Status:
    """A mutable status() for a client."""

    def __init__(self, state: str = "running", progress: float | None = None) -> None:
        self.value = (state, progress)

    def __call__(self) -> tuple[str, float | None]:
        return self.value


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def server(secret: str) -> Iterator[ControlServer]:
    srv = ControlServer(secret)
    srv.start()
    yield srv
    srv.close()


@pytest.fixture
def clients() -> Iterator[list[ControlClient]]:
    made: list[ControlClient] = []
    yield made
    for c in made:
        c.close()


def make_client(
    server: ControlServer,
    secret: str,
    clients: list[ControlClient],
    container_id: str = "0",
    **kwargs,
) -> ControlClient:
    kwargs.setdefault("host", "host-a")
    kwargs.setdefault("pid", 4242)
    kwargs.setdefault("interval_s", INTERVAL)
    kwargs.setdefault("timeout_s", 5.0)
    client = ControlClient(server.address, secret, container_id, **kwargs)
    clients.append(client)
    return client


def raw_connect(server: ControlServer) -> tuple[socket.socket, str]:
    sock = socket.create_connection(server.address, timeout=5)
    greeting = json.loads(sock.makefile("rb").readline())
    return sock, greeting["nonce"]


def read_reply(sock: socket.socket) -> dict | None:
    try:
        line = sock.makefile("rb").readline()
    except ConnectionResetError:  # the server closed with our unread bytes in its buffer
        return None
    return json.loads(line) if line else None


def assert_serves(server: ControlServer, secret: str, clients: list[ControlClient], cid: str) -> None:
    client = make_client(server, secret, clients, cid)
    assert client.connect(timeout_s=5) == 1
    client.start(Status("running"), Stops())
    assert server.wait_until(lambda r: r.get(cid) is not None and r[cid].state == "running", 5)


def test_fresh_connects_get_increasing_epochs_and_the_stale_client_is_fenced(server, secret, clients):
    first = make_client(server, secret, clients, "c", host="host-a", pid=1)
    assert first.connect(timeout_s=5) == 1
    stops = Stops()
    first.start(Status("running"), stops)
    assert server.wait_until(lambda r: r["c"].state == "running", 5)

    second = make_client(server, secret, clients, "c", host="host-b", pid=2)
    assert second.connect(timeout_s=5) == 2
    assert server.epoch_of("c") == 2

    assert stops.wait() == "fenced"
    time.sleep(10 * INTERVAL)  # more polls, all answered fenced: on_stop stays called once
    assert stops.reasons == ["fenced"]
    assert first.epoch == 1
    report = server.reports()["c"]
    assert (report.epoch, report.host, report.pid) == (2, "host-b", 2)
    assert report.state == "starting"  # the zombie's polls do not touch the new epoch's report

    # The zombie's final message is ignored too.
    first.close("failed", "zombie")
    assert server.reports()["c"].state == "starting"
    assert server.reports()["c"].detail == ""


def test_reports_show_what_the_container_sent_and_its_final_state(server, secret, clients):
    info = {"stage_id": 3, "task_attempt_id": 17}
    client = make_client(server, secret, clients, "7", host="exec-1", pid=999, info=info)
    assert server.epoch_of("7") is None
    client.connect(timeout_s=5)
    report = server.reports()["7"]
    seen = (report.state, report.host, report.pid, report.info, report.epoch)
    assert seen == ("starting", "exec-1", 999, info, 1)

    status = Status("restoring", 0.25)
    client.start(status, Stops())
    assert server.wait_until(lambda r: (r["7"].state, r["7"].progress) == ("restoring", 0.25), 5)
    status.value = ("running", None)
    assert server.wait_until(lambda r: (r["7"].state, r["7"].progress) == ("running", None), 5)

    client.close("failed", "RuntimeError: boom in task 3")
    report = server.reports()["7"]
    assert (report.state, report.detail) == ("failed", "RuntimeError: boom in task 3")


def test_reports_are_copies_and_last_seen_uses_the_servers_clock(secret, clients):
    now = [1000.0]
    server = ControlServer(secret, clock=lambda: now[0])
    server.start()
    try:
        client = make_client(server, secret, clients, "0", info={"k": 1})
        client.connect(timeout_s=5)
        assert server.reports()["0"].last_seen == 1000.0
        now[0] = 2000.0
        client.start(Status("running"), Stops())
        assert server.wait_until(lambda r: r["0"].last_seen == 2000.0, 5)
        copy = server.reports()
        copy["0"].info["k"] = 2
        copy["0"].state = "failed"
        assert server.reports()["0"].info == {"k": 1}
        assert server.reports()["0"].state == "running"
    finally:
        for c in clients:
            c.close()
        server.close()


def test_request_stop_stops_running_clients_and_refuses_fresh_ones(server, secret, clients):
    client = make_client(server, secret, clients, "0")
    client.connect(timeout_s=5)
    stops = Stops()
    client.start(Status("running"), stops)
    assert server.wait_until(lambda r: r["0"].state == "running", 5)
    assert not server.stopping

    server.request_stop()
    server.request_stop()  # idempotent
    assert server.stopping
    assert stops.wait() == "stop"
    # The driver sees the container stopping although its status() still says running.
    assert server.wait_until(lambda r: r["0"].state == "stopping", 5)
    assert stops.reasons == ["stop"]

    late = make_client(server, secret, clients, "1")
    with pytest.raises(ControlError, match="stopping"):
        late.connect(timeout_s=5)
    assert server.epoch_of("1") is None

    client.close()
    assert server.reports()["0"].state == "stopped"


def test_resume_after_a_stop_welcomes_a_new_job_models_containers_with_the_next_epoch(
    server, secret, clients
):
    old = make_client(server, secret, clients, "0")
    assert old.connect(timeout_s=5) == 1
    old.start(Status("running"), Stops())
    server.request_stop()
    assert server.wait_until(lambda r: r["0"].state == "stopping", 5)
    old.close()

    server.resume()
    assert not server.stopping
    assert server.reports() == {}, "the stopped model's reports are dropped"
    new = make_client(server, secret, clients, "0")
    assert new.connect(timeout_s=5) == 2
    stops = Stops()
    new.start(Status("running"), stops)
    assert server.wait_until(lambda r: "0" in r and r["0"].state == "running" and r["0"].epoch == 2, 5)
    assert not stops.event.wait(5 * INTERVAL), "a resumed server told the new container to stop"


def test_a_stopped_models_container_reconnecting_after_resume_is_fenced(server, secret, clients):
    old = make_client(server, secret, clients, "0")
    assert old.connect(timeout_s=5) == 1
    server.request_stop()
    late = make_client(server, secret, clients, "1")
    with pytest.raises(ControlError, match="stopping the job"):
        late.connect(timeout_s=5)
    assert server.refused_while_stopping("1") and not server.refused_while_stopping("0")
    server.resume()
    assert not server.refused_while_stopping("1")
    server.disconnect("0")  # its connection drops: it reconnects with its epoch, of the replaced model
    stops = Stops()
    old.start(Status("running"), stops)
    deadline = time.monotonic() + 5
    while "fenced" not in stops.reasons and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "fenced" in stops.reasons, stops.reasons
    assert "0" not in server.reports()  # not welcomed back into the new model's reports


def test_wrong_secret_is_refused_and_the_server_keeps_serving(server, secret, clients):
    intruder = make_client(server, new_secret(), clients, "0")
    started = time.monotonic()
    with pytest.raises(ControlError, match="authentication failed") as error:
        intruder.connect(timeout_s=60)
    assert time.monotonic() - started < 30  # a refusal is final, not retried until the timeout
    assert f"{server.address[0]}:{server.address[1]}" in str(error.value)
    assert server.epoch_of("0") is None
    assert_serves(server, secret, clients, "0")


def test_a_hello_signed_for_another_nonce_or_epoch_is_refused(server, secret):
    sock, nonce = raw_connect(server)
    with sock:
        mac = hmac.new(secret.encode(), f"not-{nonce}\n0".encode(), hashlib.sha256).hexdigest()
        hello = {"type": "hello", "container_id": "0", "mac": mac, "host": "h", "pid": 1, "info": {}}
        sock.sendall(json.dumps(hello).encode() + b"\n")
        assert read_reply(sock) == {"type": "refused", "reason": "authentication failed"}

    sock, nonce = raw_connect(server)
    with sock:  # signed as a fresh hello, sent as a reconnect of epoch 5
        mac = hmac.new(secret.encode(), f"{nonce}\n0".encode(), hashlib.sha256).hexdigest()
        hello = {"type": "hello", "container_id": "0", "mac": mac, "host": "h", "pid": 1, "epoch": 5}
        sock.sendall(json.dumps(hello).encode() + b"\n")
        assert read_reply(sock)["type"] == "refused"


def test_unreachable_driver_raises_naming_the_address(clients):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = probe.getsockname()
    client = ControlClient(address, new_secret(), "0", host="h", pid=1)
    clients.append(client)
    with pytest.raises(ControlError, match=f"127.0.0.1:{address[1]}"):
        client.connect(timeout_s=0.3)
    assert client.epoch is None


def test_client_stops_as_lost_when_the_driver_goes_away(server, secret, clients):
    now = [0.0]
    client = make_client(server, secret, clients, "0", timeout_s=0.5, clock=lambda: now[0])
    client.connect(timeout_s=5)
    stops = Stops()
    client.start(Status("running"), stops)
    assert server.wait_until(lambda r: r["0"].state == "running", 5)

    now[0] += 10.0  # time passes while the driver answers: not lost
    seen = server.reports()["0"].last_seen
    assert server.wait_until(lambda r: r["0"].last_seen > seen, 5)
    assert stops.reasons == []

    server.close()
    time.sleep(10 * INTERVAL)  # unreachable, but not for timeout_s yet
    assert stops.reasons == []
    now[0] += 0.6
    assert stops.wait() == "lost"
    time.sleep(5 * INTERVAL)
    assert stops.reasons == ["lost"]
    client.close()  # best effort: the driver is gone, close must not hang or raise


def test_a_dropped_connection_reconnects_with_the_same_epoch(server, secret, clients):
    client = make_client(server, secret, clients, "0", timeout_s=5.0)
    assert client.connect(timeout_s=5) == 1
    status = Status("restoring", 0.1)
    stops = Stops()
    client.start(status, stops)
    assert server.wait_until(lambda r: r["0"].state == "restoring", 5)

    assert server.disconnect("0") == 1
    status.value = ("running", None)
    assert server.wait_until(lambda r: r["0"].state == "running", 5)
    assert server.disconnect("0") == 1  # a new connection exists: the client reconnected
    status.value = ("restoring", 0.5)
    assert server.wait_until(lambda r: r["0"].progress == 0.5, 5)

    assert client.epoch == 1
    assert server.epoch_of("0") == 1
    assert server.reports()["0"].epoch == 1
    assert stops.reasons == []


def test_a_stale_client_that_reconnects_is_fenced(server, secret, clients):
    stale = make_client(server, secret, clients, "0")
    stale.connect(timeout_s=5)
    make_client(server, secret, clients, "0").connect(timeout_s=5)
    # The stale client's connection drops before it ever polls; its reconnect (epoch 1) is answered fenced.
    assert server.disconnect("0") == 2
    stops = Stops()
    stale.start(Status("running"), stops)
    assert stops.wait() == "fenced"
    assert server.epoch_of("0") == 2


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\xff\xfe garbage\n",
        b"not json at all\n",
        b"[1, 2, 3]\n",
        b'{"type": "poll", "state": "running"}\n',  # a poll before any hello
        b'{"type": "hello", "container_id": 5, "mac": "x", "host": "h", "pid": 1}\n',
        b"[" * 5000 + b"\n",
        b"x" * 40000,  # a line over the limit, no newline
    ],
)
def test_garbage_does_not_break_the_server(server, secret, clients, payload):
    sock, _ = raw_connect(server)
    with sock:
        sock.sendall(payload)
        assert read_reply(sock) is None  # the server dropped the connection
    assert_serves(server, secret, clients, "0")


def test_a_malformed_poll_drops_only_that_connection(server, secret, clients):
    sock, nonce = raw_connect(server)
    with sock:
        mac = hmac.new(secret.encode(), f"{nonce}\nraw".encode(), hashlib.sha256).hexdigest()
        hello = {"type": "hello", "container_id": "raw", "mac": mac, "host": "h", "pid": 1, "info": {}}
        sock.sendall(json.dumps(hello).encode() + b"\n")
        assert read_reply(sock) == {"type": "welcome", "epoch": 1}
        sock.sendall(b'{"type": "poll", "state": "dancing", "progress": null}\n')
        assert read_reply(sock) is None
    assert server.reports()["raw"].state == "starting"
    assert_serves(server, secret, clients, "0")


def test_silent_peers_do_not_hold_close(secret):
    server = ControlServer(secret)
    server.start()
    # Connected but silent: their threads wait for a hello (seconds), close() must wake them.
    idle = [socket.create_connection(server.address, timeout=5) for _ in range(3)]
    time.sleep(0.1)
    server.close()
    alive = [t.name for t in threading.enumerate() if t.name.startswith("samsa-control")]
    assert alive == []
    for sock in idle:
        sock.close()


def test_wait_until_wakes_on_updates_and_times_out(server, secret, clients):
    assert server.wait_until(lambda r: r == {}, 0.0)
    assert not server.wait_until(lambda r: "0" in r, 0.1)

    client = make_client(server, secret, clients, "0")
    waiter: list[bool] = []
    thread = threading.Thread(target=lambda: waiter.append(server.wait_until(lambda r: "0" in r, 5)))
    thread.start()
    client.connect(timeout_s=5)
    thread.join(5)
    assert waiter == [True]


def test_close_requires_a_final_state_and_start_requires_connect(server, secret, clients):
    client = make_client(server, secret, clients, "0")
    with pytest.raises(ControlError, match="connect"):
        client.start(Status(), Stops())
    with pytest.raises(ValueError, match="running"):
        client.close("running")
    client.connect(timeout_s=5)
    client.close()
    assert server.reports()["0"].state == "stopped"
    client.close()  # idempotent
