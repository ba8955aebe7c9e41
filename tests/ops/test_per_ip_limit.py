"""max_connections_per_ip: past the limit, a new connection from the same client address is
closed at accept without an HTTP answer, while another address (127.0.0.2 on loopback) is still
served; once one of the held connections closes, the first address is served again. With the
limit at 0 there is no per-address limit."""
import json
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import ROOT, sparsed_bin, start_server  # noqa: E402,F401  (start_server: a fixture)

LIMIT = 4
REQ = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def open_half(port, source):
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    s.sendall(b"GET /hea")
    return s


def closed_by_server(s):
    """Whether the server has closed s (EOF or reset), without waiting (a socket with a timeout
    would wait it out on an open connection, so the check runs non-blocking)."""
    timeout = s.gettimeout()
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.settimeout(timeout)


def held(port, n, source="127.0.0.1", timeout=10):
    """n connections that sent half a request line and wait (the server keeps them open). A
    connection the server refused is opened again: an earlier connection from the same address
    (a test's first request) counts against the limit until the server has cleaned it up, which
    a loaded machine can delay past the next accept."""
    socks = [open_half(port, source) for _ in range(n)]
    deadline = time.time() + timeout
    while True:
        time.sleep(1.0)  # let the server accept (or refuse) them all before the next one arrives
        refused = [i for i, s in enumerate(socks) if closed_by_server(s)]
        if not refused or time.time() > deadline:
            return socks
        for i in refused:
            socks[i].close()
            socks[i] = open_half(port, source)


def health(port, source="127.0.0.1"):
    """The raw answer to GET /health ('' when the server closed the connection unanswered)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as s:
            s.sendall(REQ)
            out = b""
            while chunk := s.recv(4096):
                out += chunk
            return out.decode(errors="replace")
    except (ConnectionResetError, BrokenPipeError):
        return ""


def served_again(port, timeout=10):
    """The first answer to GET /health within `timeout` s (the server notices closed
    connections on its next poll, so the first tries may still be refused)."""
    deadline = time.time() + timeout
    while not (ans := health(port)) and time.time() < deadline:
        time.sleep(0.1)
    return ans


def loopback_alias_works():
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("http_threads", [1, 2])
def test_connections_past_the_per_ip_limit_are_refused(start_server, http_threads):
    s = start_server(["--max-connections-per-ip", LIMIT, "--http-threads", http_threads])
    assert health(s.port).startswith("HTTP/1.1 200")
    socks = held(s.port, LIMIT)
    try:
        assert health(s.port) == "", "a connection past the per-IP limit got an answer"
        if loopback_alias_works():
            assert health(s.port, source="127.0.0.2").startswith("HTTP/1.1 200")
        socks.pop().close()
        assert served_again(s.port).startswith("HTTP/1.1 200")
    finally:
        for c in socks:
            c.close()


def test_zero_means_no_per_ip_limit(start_server):
    s = start_server(["--max-connections-per-ip", 0, "--max-connections", 64])
    socks = held(s.port, 2 * LIMIT)
    try:
        assert health(s.port).startswith("HTTP/1.1 200")
    finally:
        for c in socks:
            c.close()


def test_default_limit_is_on_and_below_max_connections(tmp_path):
    """The shipped default protects: one address cannot take every connection slot."""
    cfg = tmp_path / "empty.json"
    cfg.write_text("{}")
    r = subprocess.run([sparsed_bin(), "serve", "--print-config", "--config", str(cfg)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    conf = json.loads(r.stdout)
    assert 0 < conf["max_connections_per_ip"] < conf["max_connections"]


def test_sighup_reports_a_changed_limit_as_needing_a_restart(start_server):
    s = start_server(config={"max_connections_per_ip": 8})
    s.config_path.write_text(json.dumps({"max_connections_per_ip": 2}))
    s.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "restart to apply" not in s.log_text() and time.time() < deadline:
        time.sleep(0.1)
    assert "restart to apply" in s.log_text()
    held_socks = held(s.port, 4)  # still the old limit (8): the fifth connection is served
    try:
        assert health(s.port).startswith("HTTP/1.1 200")
    finally:
        for c in held_socks:
            c.close()
