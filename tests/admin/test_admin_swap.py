"""The hot swap is asynchronous: POST /admin/v1/model answers 202 and the load runs on its own
thread while the old model keeps serving; GET /admin/v1/model shows the swap's state (loading,
done, failed with its error); a second POST while one loads gets 409; a bad checkpoint leaves
the old model serving; SIGTERM during a load waits for the load's current stage, discards it and
exits cleanly. admin_listen moves the admin API to a listener of its own.

A load is held open deterministically with a checkpoint whose model.safetensors is a FIFO: the
loader's open() blocks until the test opens the other end (then fails: not a regular file)."""
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from admin_helpers import (ADMIN, KEY, ROOT, SMALL, admin, completion, finished, http, metrics, served_ids, srv,
                           start, swap, wait_job, wait_swap)

TINY = ROOT / "models" / "tiny"


def copy_model(src, dst, skip=()):
    dst.mkdir()
    for f in src.iterdir():
        if f.name not in skip:
            shutil.copyfile(f, dst / f.name)
    return dst


class Gate:
    """A checkpoint whose weights file is a FIFO: a swap to it stays loading until release()."""

    def __init__(self, tmp):
        self.dir = copy_model(TINY, tmp / "gated", skip={"model.safetensors"})
        self.fifo = self.dir / "model.safetensors"
        os.mkfifo(self.fifo)

    def release(self, timeout=60):
        """Opens the writing end once the loader waits on the reading end, and closes it."""
        deadline = time.time() + timeout * srv.TIMEOUT_SCALE
        while True:
            try:
                os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError as e:  # ENXIO: the loader has not reached its open() yet
                if e.errno != errno.ENXIO or time.time() > deadline:
                    raise
                time.sleep(0.02)


def loading(s):
    st, info = admin(s, "GET", "/model")
    assert st == 200, info
    return info


@pytest.fixture
def server(tmp_path):
    s = start(tmp_path)
    yield s
    s.stop()


def test_202_then_poll_to_done(server, tmp_path):
    copy = copy_model(TINY, tmp_path / "tiny-copy")
    st, info = admin(server, "GET", "/model")
    assert st == 200 and info["swap"] is None and info["name"] == "tiny"
    info = swap(server, copy, "tiny-v2")
    sw = info["swap"]
    assert sw["state"] == "done" and sw["error"] is None and sw["name"] == "tiny-v2", sw
    assert sw["path"] == str(copy.resolve()) and sw["previous"]["name"] == "tiny"
    assert sw["started_at"] <= sw["finished_at"] and sw["elapsed_seconds"] >= 0
    assert info["name"] == "tiny-v2" and info["path"] == str(copy.resolve()) and info["swaps"] == 1
    assert served_ids(server) == ["tiny-v2"]
    st, body = completion(server)
    assert st == 200 and body["model"] == "tiny-v2"
    m = metrics(server)
    assert m["sparsed_model_swaps_total"] == 1 and m["sparsed_model_swap_loading"] == 0
    assert m["sparsed_model_swaps_failed_total"] == 0


def test_409_while_loading_and_old_model_serves(server, tmp_path):
    gate = Gate(tmp_path)
    st, rec = admin(server, "POST", "/model", {"path": str(gate.dir), "name": "gated"})
    assert st == 202 and rec["state"] == "loading", rec
    try:
        # the load is blocked: the swap stays loading, the old model answers everything
        for _ in range(3):
            info = loading(server)
            assert info["swap"]["state"] == "loading" and info["swap"]["finished_at"] is None, info
            assert info["name"] == "tiny"
            st, body = completion(server, max_tokens=6)
            assert st == 200 and body["model"] == "tiny", body
        assert served_ids(server) == ["tiny"]
        assert metrics(server)["sparsed_model_swap_loading"] == 1
        # one swap at a time: another POST (even a valid one) is refused, nothing else changes
        st, b = admin(server, "POST", "/model", {"path": str(TINY)})
        assert st == 409 and b["error"]["code"] == "swap_in_progress", b
        assert str(gate.dir) in b["error"]["message"]
        # a request that the cheap checks refuse is still answered 400 at once
        st, b = admin(server, "POST", "/model", {"path": str(tmp_path / "absent")})
        assert st == 400 and b["error"]["param"] == "path", b
        assert loading(server)["swap"]["path"] == str(gate.dir)
    finally:
        gate.release()
    info = wait_swap(server)
    sw = info["swap"]
    assert sw["state"] == "failed" and "not a regular file" in sw["error"], sw
    assert sw["finished_at"] >= sw["started_at"] and sw["previous"] is None
    assert info["name"] == "tiny" and served_ids(server) == ["tiny"] and completion(server)[0] == 200
    assert metrics(server)["sparsed_model_swaps_failed_total"] == 1
    # after a failure the next swap is accepted
    info = swap(server, TINY, "tiny-again")
    assert info["swap"]["state"] == "done" and served_ids(server) == ["tiny-again"]


def test_bad_checkpoint_fails_in_the_background(server, tmp_path):
    bad = copy_model(TINY, tmp_path / "truncated")
    data = (TINY / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[: len(data) // 2])  # header intact, tensors cut
    info = swap(server, bad)  # config.json is fine: accepted, fails while loading
    sw = info["swap"]
    assert sw["state"] == "failed" and sw["error"] and "model.safetensors" in sw["error"], sw
    assert info["name"] == "tiny" and info["swaps"] == 0 and served_ids(server) == ["tiny"]
    st, body = completion(server)
    assert st == 200 and body["model"] == "tiny"
    assert "failed (the model in service stays)" in server.log_text()
    # the error stays visible until the next swap
    assert loading(server)["swap"]["error"] == sw["error"]


def test_completions_during_a_real_load(server, tmp_path):
    if not SMALL.is_dir():
        pytest.skip(f"{SMALL} absent (the shared test models sit beside the clone in CI): "
                    "only the FIFO-gated load covers serving during a swap")
    results = []
    stop = threading.Event()

    def load():
        while not stop.is_set():
            results.append(completion(server, max_tokens=4)[0])

    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        st, rec = admin(server, "POST", "/model", {"path": str(SMALL)})
        assert st == 202 and rec["state"] == "loading", rec
        info = wait_swap(server, every=0.01)
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(timeout=60)
    assert info["swap"]["state"] == "done" and info["name"] == "small" and info["n_layers"] == 8, info
    assert results and set(results) == {200}, results
    assert served_ids(server) == ["small"]


def test_job_activation_waits_for_an_api_swap(server, tmp_path):
    """One swap at a time across both triggers: a job's activation waits for the API swap that is
    loading, then swaps (the job succeeds once its checkpoint serves)."""
    gate = Gate(tmp_path)
    assert admin(server, "POST", "/model", {"path": str(gate.dir)})[0] == 202
    out = tmp_path / "wanda-4of8"
    spec = {"source": "text", "text_file": str(ROOT / "tests" / "fixtures" / "prune" / "calib_stdlib.txt"),
            "tokens_budget": 256, "seq_len": 128, "solver": "wanda", "pattern": "4:8", "output": str(out),
            "activate": True, "model": str(TINY)}
    try:
        st, job = admin(server, "POST", "/jobs", spec)
        assert st == 202, job
        rec = wait_job(server, job["id"], lambda r: r["phase"] == "activate" or finished(r), timeout=120)
        assert rec["state"] == "running" and out.is_dir(), rec  # pruned, waiting to swap
        sw = loading(server)["swap"]
        assert (sw["trigger"], sw["state"], sw["path"]) == ("api", "loading", str(gate.dir)), sw
    finally:
        gate.release()
    rec = wait_job(server, job["id"], finished, timeout=120)
    assert rec["state"] == "succeeded" and rec["activated"] is True, rec
    info = loading(server)
    assert (info["swap"]["trigger"], info["swap"]["state"], info["path"]) == ("job", "done", str(out)), info
    assert info["sparsity"] == "4:8" and served_ids(server) == [out.name]
    assert metrics(server)["sparsed_model_swaps_failed_total"] == 1  # the gated API swap


def test_sigterm_during_a_load_exits_cleanly(tmp_path):
    s = start(tmp_path)
    try:
        gate = Gate(tmp_path)
        st, rec = admin(s, "POST", "/model", {"path": str(gate.dir)})
        assert st == 202, rec
        assert loading(s)["swap"]["state"] == "loading"
        s.proc.send_signal(signal.SIGTERM)
        # shutdown waits for the load's current stage (here: blocked in open()), then discards it
        deadline = time.time() + 30
        while "stopped at the end of its current load stage" not in s.log_text() and time.time() < deadline:
            assert s.proc.poll() is None, s.log_text()
            time.sleep(0.05)
        assert s.proc.poll() is None, s.log_text()
        gate.release()
        assert s.proc.wait(timeout=60 * srv.TIMEOUT_SCALE) == 0, s.log_text()
        log = s.log_text()
        assert "shutting down (exit 0)" in log and "now serving" not in log, log
    finally:
        s.stop()


def test_admin_listen(tmp_path):
    port = srv.free_port()
    s = start(tmp_path, args=["--admin-listen", f"127.0.0.1:{port}"])
    try:
        main = s.url
        s.url = f"http://127.0.0.1:{port}"  # admin() talks to s.url
        st, info = admin(s, "GET", "/model")
        assert st == 200 and info["name"] == "tiny", info
        assert admin(s, "GET", "/model", token=None)[0] == 401  # the token is still required
        assert admin(s, "GET", "/model", token=KEY)[0] == 401
        assert admin(s, "GET", "/jobs")[0] == 200
        info = swap(s, TINY, "via-admin-port")
        assert info["swap"]["state"] == "done"
        # nothing but /admin/ on the admin listener
        for path in ("/metrics", "/v1/models", "/health", "/", "/info"):
            st, _, body = http("GET", s.url + path, headers={"Authorization": f"Bearer {KEY}"})
            assert st == 404, (path, st, body)
        # the main listener serves everything but /admin/
        s.url = main
        st, _, body = http("GET", main + "/admin/v1/model", headers={"Authorization": f"Bearer {ADMIN}"})
        err = json.loads(body)["error"]
        assert st == 404 and "admin_listen" in err["message"], body
        assert http("POST", main + "/admin/v1/model", {"path": str(TINY)},
                    headers={"Authorization": f"Bearer {ADMIN}"})[0] == 404
        assert http("GET", main + "/metrics")[0] == 200
        assert served_ids(s) == ["via-admin-port"] and completion(s)[0] == 200
        assert f"admin API on http://127.0.0.1:{port}/admin/v1 only" in s.log_text()
    finally:
        s.stop()


def test_admin_listen_refused_without_token_or_when_taken(tmp_path):
    r = subprocess.run([srv.sparsed_bin(), "serve", "--model", str(TINY), "--admin-listen", "127.0.0.1:9",
                            "--print-config"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode != 0 and "admin_listen" in r.stderr and "admin_token" in r.stderr, r.stderr
    # a port already taken: start-up fails naming admin_listen
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        s = start(tmp_path, args=["--admin-listen", f"127.0.0.1:{taken}"], ready=False)
        try:
            assert s.proc.wait(timeout=60) != 0
            assert "admin_listen" in s.log_text() and str(taken) in s.log_text()
        finally:
            s.stop()
