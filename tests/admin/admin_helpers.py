"""Shared pieces of the admin API tests: the daemon fixture of tests/server/conftest.py (loaded
under its own module name so it never clashes with another conftest), started with an admin
token, an API key and a state directory, and small clients for the admin routes."""
import importlib.util
import json
import pathlib
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sd_server_conftest", ROOT / "tests" / "server" / "conftest.py")
srv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(srv)
Server, http = srv.Server, srv.http

ADMIN = "admin-secret-token"
KEY = "api-key-1"
PROMPTS = ROOT / "prune" / "prompts" / "calib_code_prose.jsonl"
SMALL = (ROOT / ".." / "shared" / "models" / "small").resolve()


def start(tmp, state=None, args=(), admin=ADMIN, ready=True):
    """A daemon with the admin API on (unless admin is None) and its state in `state`."""
    a = ["--api-key", KEY, "--state-dir", str(state or pathlib.Path(tmp) / "state")]
    if admin:
        a += ["--admin-token", admin]
    s = Server(tmp, a + [str(x) for x in args])
    return s.wait_ready() if ready else s


def admin(s, method, path, body=None, token=ADMIN, timeout=120):
    """(status, parsed JSON body) of an admin request."""
    hdr = {"Authorization": f"Bearer {token}"} if token else {}
    st, _, raw = http(method, s.url + "/admin/v1" + path, body, headers=hdr, timeout=timeout)
    return st, json.loads(raw) if raw else None


def completion(s, prompt="def main(", max_tokens=4, **kw):
    """A greedy completion without a model field (valid whichever model is served)."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **kw}
    st, _, raw = http("POST", s.url + "/v1/completions", body, headers={"Authorization": f"Bearer {KEY}"})
    return st, json.loads(raw)


def served_ids(s):
    st, _, raw = http("GET", s.url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert st == 200, raw
    return [m["id"] for m in json.loads(raw)["data"]]


def wait_job(s, job_id, until, timeout=120, every=0.1):
    """Polls a job until until(record) holds; returns the record (fails with the last one)."""
    deadline = time.time() + timeout
    rec = None
    while time.time() < deadline:
        st, rec = admin(s, "GET", f"/jobs/{job_id}")
        assert st == 200, rec
        if until(rec):
            return rec
        time.sleep(every)
    raise AssertionError(f"job {job_id} did not get there in {timeout}s: {rec}\n{s.log_text()[-3000:]}")


def finished(rec):
    return rec["state"] in ("succeeded", "failed", "cancelled")


def metrics(s):
    st, _, body = http("GET", s.url + "/metrics")
    assert st == 200
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def long_job(out, **kw):
    """A decode job big enough to still be running seconds later (cancel and kill tests)."""
    return {"prompts_file": str(PROMPTS), "tokens_budget": 200000, "max_new_tokens": 512, "output": str(out),
            "threads": 1, **kw}


def wait_swap(s, timeout=120, every=0.05):
    """Polls GET /admin/v1/model until its swap is no longer loading; returns the model info."""
    deadline = time.time() + timeout * srv.TIMEOUT_SCALE
    info = None
    while time.time() < deadline:
        st, info = admin(s, "GET", "/model")
        assert st == 200, info
        if info["swap"] is None or info["swap"]["state"] != "loading":
            return info
        time.sleep(every)
    raise AssertionError(f"the swap did not end in {timeout}s: {info}\n{s.log_text()[-3000:]}")


def swap(s, path, name=None, timeout=120):
    """POST /admin/v1/model (202, state loading), then polls until the swap has ended; returns
    the model info of GET /admin/v1/model (its "swap" says done or failed)."""
    body = {"path": str(path)} if name is None else {"path": str(path), "name": name}
    st, rec = admin(s, "POST", "/model", body)
    assert st == 202, rec
    assert rec["object"] == "admin.model_swap" and rec["state"] == "loading" and rec["trigger"] == "api", rec
    assert rec["path"] == str(pathlib.Path(path).resolve()) and rec["error"] is None, rec
    return wait_swap(s, timeout)
