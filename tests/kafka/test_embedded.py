"""EmbeddedBroker: start/stop, port conflicts, and the foreground CLI."""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from samsa.kafka import BrokerStartError, KafkaAdmin
from samsa.kafka.embedded import EmbeddedBroker, free_port, noida_binary

needs_noida = pytest.mark.skipif(
    importlib.util.find_spec("noida_db") is None, reason="noida-db not installed"
)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@needs_noida
@pytest.mark.integration
def test_start_serves_and_stop_cleans_up() -> None:
    with EmbeddedBroker() as broker:
        data_dir = broker.data_dir
        port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        assert broker.is_running() and data_dir.is_dir()
        admin = KafkaAdmin({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topic("embedded-check", 2)
        assert admin.require_topics(["embedded-check"]) == {"embedded-check": 2}
    assert not broker.is_running()
    assert not data_dir.exists()  # its own temp dir is removed
    assert not _port_open(port)


@needs_noida
@pytest.mark.integration
def test_given_data_dir_is_kept(tmp_path: Path) -> None:
    broker = EmbeddedBroker(tmp_path / "d").start()
    broker.stop()
    assert (tmp_path / "d" / "samsa-broker.log").is_file()


@needs_noida
@pytest.mark.integration
def test_port_in_use_raises_with_log_tail(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(BrokerStartError, match=rf"port {port}") as err:
            EmbeddedBroker(tmp_path, port=port, start_timeout=5).start()
    assert "Log tail" in str(err.value)


@needs_noida
@pytest.mark.integration
def test_cli_prints_address_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "samsa.kafka.embedded", "--data-dir", str(tmp_path), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"127.0.0.1:{port}"
        assert _port_open(port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert not _port_open(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(BrokerStartError, match=r"noida-db==0\.2\.3"):
        noida_binary()


def test_bootstrap_before_start_is_an_error() -> None:
    with pytest.raises(BrokerStartError, match="not started"):
        _ = EmbeddedBroker().bootstrap_servers
