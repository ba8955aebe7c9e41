"""The daemon fixture of tests/server (conftest.Server) loaded under its own module name, so
the load tests start `sparsed serve` exactly as the integration tests do, plus the /metrics
and /proc readings the leak checks use."""
import importlib.util
import pathlib
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sd_server_conftest", ROOT / "tests" / "server" / "conftest.py")
srv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(srv)
Server, http = srv.Server, srv.http


def metrics(s):
    """/metrics as {name or name{labels}: float}."""
    st, _, body = s.get("/metrics")
    assert st == 200
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def fd_count(s):
    return len(list(pathlib.Path(f"/proc/{s.proc.pid}/fd").iterdir()))


def wait_idle(s, timeout=60):
    """Waits until no sequence runs or waits and the KV cache is empty; returns the metrics."""
    deadline = time.time() + timeout * srv.TIMEOUT_SCALE
    while True:
        m = metrics(s)
        idle = (m.get("sparsed_num_requests_running") == 0 and m.get("sparsed_num_requests_waiting") == 0
                and m.get("sparsed_kv_cache_usage_ratio") == 0)
        if idle or time.time() > deadline:
            return m
        time.sleep(0.2)
