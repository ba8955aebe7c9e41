"""Fixtures for the daemon's integration tests: start `sparsed serve` on a free port of
127.0.0.1 with the bundled model (models/tiny), wait until /ready answers 200, stop it after."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "tiny"
# Deadlines that depend on how fast the daemon computes stretch by $SD_TIMEOUT_SCALE (the
# sanitized pass of tools/run_tests.sh sets 3: ASan makes the CPU backend ~3x slower).
TIMEOUT_SCALE = float(os.environ.get("SD_TIMEOUT_SCALE", "1"))


def sparsed_bin():
    """The binary under test: $SPARSED_BIN, else $SD_BUILD/sparsed (default build/)."""
    p = os.environ.get("SPARSED_BIN") or str(ROOT / os.environ.get("SD_BUILD", "build") / "sparsed")
    if not os.access(p, os.X_OK):
        pytest.skip(f"{p} not built (set SD_BUILD or SPARSED_BIN)")
    return p


def metric(srv, name):
    """One unlabelled sample of a daemon's /metrics (KeyError when it has none)."""
    status, _, body = srv.get("/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


def gpu_count():
    """GPUs that `nvidia-smi -L` lists (0 without the tool or a driver)."""
    if not shutil.which("nvidia-smi"):
        return 0
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU ")) if r.returncode == 0 else 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, headers=None, timeout=60):
    """(status, headers, body bytes) without raising on HTTP errors."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None and "Content-Type" not in (headers or {}):
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class Server:
    """One daemon process; `url` is its base URL, `log` the path of its stderr."""

    def __init__(self, tmp, args=(), config=None, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = pathlib.Path(tmp) / f"sparsed-{self.port}.log"
        cmd = [sparsed_bin(), "serve", "--model", str(MODEL), "--host", "127.0.0.1",
               "--port", str(self.port), "--threads", "2"]
        if not (config and "log_level" in config):  # a flag would override the file's level
            cmd += ["--log-level", "debug"]
        # Always an explicit config file (built-in defaults + `config`), so the tests do not
        # depend on the shipped config/sparsed.json (test_lifecycle checks that one).
        cfg = pathlib.Path(tmp) / f"sparsed-{self.port}.json"
        cfg.write_text(json.dumps(config or {}))
        self.config_path = cfg
        cmd += ["--config", str(cfg)]
        # $SD_SERVE_ARGS adds flags to every daemon (e.g. "--backend cuda" on a GPU machine)
        cmd += os.environ.get("SD_SERVE_ARGS", "").split() + [str(a) for a in args]
        self.cmd = cmd
        self.logf = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout * TIMEOUT_SCALE
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sparsed exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if http("GET", self.url + "/ready", timeout=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"sparsed not ready after {timeout}s:\n{self.log_text()}")

    def log_text(self):
        self.logf.flush()
        return self.log.read_text(errors="replace")

    def get(self, path, **kw):
        return http("GET", self.url + path, **kw)

    def post(self, path, body, **kw):
        return http("POST", self.url + path, body, **kw)

    def proc_status(self, key):
        """A field of /proc/PID/status in kB (VmRSS ...)."""
        for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def cpu_seconds(self):
        """User + system CPU time of the process so far, from /proc/PID/stat."""
        fields = pathlib.Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def thread_cpu_seconds(self, exclude=()):
        """CPU time summed over the process's threads whose name is not in `exclude`."""
        total = 0
        for task in pathlib.Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                if (task / "comm").read_text().strip() in exclude:
                    continue
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended meanwhile
                continue
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self):
        # $SD_STOP_GRACE seconds (the sanitized run sets it): SIGTERM, then SIGTERM again (exit
        # without draining), so the daemon tears down and LeakSanitizer checks it; else SIGKILL.
        grace = float(os.environ.get("SD_STOP_GRACE", "0"))
        for wait in (min(grace, 3), grace) if grace > 0 else ():
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.logf.close()


@pytest.fixture
def start_server(tmp_path):
    """Factory: start_server(args=[...], config={...}) -> a ready Server; all stopped after."""
    servers = []

    def start(args=(), config=None, env=None, ready=True):
        s = Server(tmp_path, args, config, env)
        servers.append(s)
        return s.wait_ready() if ready else s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One shared daemon (default options) for the tests of a module."""
    s = Server(tmp_path_factory.mktemp("srv"))
    try:
        yield s.wait_ready()
    finally:
        s.stop()


@pytest.fixture
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
