"""The daemon speaks systemd's sd_notify protocol: with NOTIFY_SOCKET pointing at a datagram
socket this test owns, it sees STATUS= while loading, READY=1 once the model is loaded and the
daemon listens, WATCHDOG=1 pings at half of WATCHDOG_USEC, RELOADING=1 then READY=1 around a
SIGHUP, and STOPPING=1 on SIGTERM, in that order."""
import os
import pathlib
import signal
import socket
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import Server, http  # noqa: E402


def recv_until(sock, pred, timeout, seen):
    """Collects datagrams into `seen` until one satisfies pred; returns it (or None)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        sock.settimeout(max(0.01, deadline - time.time()))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            break
        seen.append(msg)
        if pred(msg):
            return msg
    return None


def test_notify_sequence(tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    seen = []
    srv = Server(tmp_path, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
    try:
        ready = recv_until(sock, lambda m: "READY=1" in m.split("\n"), 60, seen)
        assert ready, f"no READY=1; got {seen}"
        # STATUS= came first, while loading, and READY=1 means the HTTP API answers.
        assert any(m.startswith("STATUS=loading model") for m in seen[:seen.index(ready)]), seen
        assert http("GET", srv.url + "/ready")[0] == 200
        assert "STATUS=serving" in ready

        t0 = time.time()
        ping = recv_until(sock, lambda m: m == "WATCHDOG=1", 2, seen)
        assert ping, f"no WATCHDOG=1 within 2 s; got {seen}"
        assert time.time() - t0 < 1.0  # pinged at half of 400 ms, not at the full period

        srv.proc.send_signal(signal.SIGHUP)
        rel = recv_until(sock, lambda m: m.startswith("RELOADING=1"), 10, seen)
        assert rel and "MONOTONIC_USEC=" in rel, seen
        back = recv_until(sock, lambda m: "READY=1" in m.split("\n"), 10, seen)
        assert back, f"no READY=1 after the reload; got {seen}"

        srv.proc.send_signal(signal.SIGTERM)
        stop = recv_until(sock, lambda m: "STOPPING=1" in m.split("\n"), 10, seen)
        assert stop, f"no STOPPING=1; got {seen}"
        assert srv.proc.wait(timeout=30) == 0
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
        sock.close()
        os.unlink(path)


def test_no_watchdog_pings_without_watchdog_usec(tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    seen = []
    srv = Server(tmp_path, env={"NOTIFY_SOCKET": path})
    try:
        assert recv_until(sock, lambda m: "READY=1" in m.split("\n"), 60, seen), seen
        recv_until(sock, lambda m: False, 1.5, seen)
        assert "WATCHDOG=1" not in seen
    finally:
        srv.proc.terminate()
        srv.proc.wait(timeout=30)
        sock.close()
