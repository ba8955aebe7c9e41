"""Stopping jobs: a second job waits in the queue (one job runs at a time) and can be cancelled
there; a running job cancelled mid-way ends "cancelled" with no output; a daemon killed with
SIGKILL mid-job comes back with the job "failed"/"interrupted", no partial output, and serves."""
import json
import signal
import time

from admin_helpers import admin, completion, finished, long_job, metrics, served_ids, start, wait_job


def outputs(tmp, name):
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(name))


def test_queue_and_cancel(tmp_path):
    s = start(tmp_path)
    try:
        st, j1 = admin(s, "POST", "/jobs", long_job(tmp_path / "out1"))
        assert st == 202, j1
        st, j2 = admin(s, "POST", "/jobs", long_job(tmp_path / "out2"))
        assert st == 202 and j2["state"] == "queued"
        # the same output cannot be claimed twice while a job is pending
        st, b = admin(s, "POST", "/jobs", long_job(tmp_path / "out2"))
        assert st == 400 and b["error"]["param"] == "output"
        rec1 = wait_job(s, j1["id"], lambda r: r["state"] == "running" and r["tokens"] > 0, timeout=60)
        assert rec1["phase"] in ("generate", "capture") and 0 < rec1["progress"] < 1
        st, lst = admin(s, "GET", "/jobs")
        assert [j["id"] for j in lst["data"]] == [j1["id"], j2["id"]]
        assert lst["data"][1]["state"] == "queued"  # one job at a time
        m = metrics(s)
        assert m['sparsed_admin_jobs{state="running"}'] == 1 and m['sparsed_admin_jobs{state="queued"}'] == 1
        assert any(k.startswith(f'sparsed_admin_job_progress{{job="{j1["id"]}"') for k in m)
        # cancel the queued one: at once
        st, c2 = admin(s, "DELETE", f"/jobs/{j2['id']}")
        assert st == 200 and c2["state"] == "cancelled"
        # cancel the running one: it stops at its next safe point
        st, c1 = admin(s, "DELETE", f"/jobs/{j1['id']}")
        assert st == 200 and c1["cancel_requested"] is True and c1["state"] in ("running", "cancelled")
        rec1 = wait_job(s, j1["id"], finished, timeout=60)
        assert rec1["state"] == "cancelled" and rec1["finished_at"] >= rec1["started_at"]
        assert outputs(tmp_path, "out") == []  # neither the output nor a temporary directory
        # finished jobs cannot be cancelled again; the server is unaffected
        st, b = admin(s, "DELETE", f"/jobs/{j1['id']}")
        assert st == 409 and b["error"]["param"] == "id"
        assert completion(s)[0] == 200 and served_ids(s) == ["tiny"]
        m = metrics(s)
        assert m['sparsed_admin_jobs{state="cancelled"}'] == 2 and m['sparsed_admin_jobs{state="running"}'] == 0
        for j in (j1, j2):
            disk = json.loads((tmp_path / "state" / "jobs" / f"{j['id']}.json").read_text())
            assert disk["state"] == "cancelled"
    finally:
        s.stop()


def test_kill9_mid_job_then_restart(tmp_path):
    state = tmp_path / "state"
    s = start(tmp_path, state=state)
    out = tmp_path / "killed-out"
    try:
        st, job = admin(s, "POST", "/jobs", long_job(out, activate=True))
        assert st == 202, job
        wait_job(s, job["id"], lambda r: r["state"] == "running" and r["tokens"] > 0, timeout=60)
        # what the checkpoint writer leaves when its process dies between mkdtemp and rename
        partial = tmp_path / "killed-out.tmp-Ab12Cd"
        partial.mkdir()
        (partial / "model.safetensors").write_bytes(b"\0" * 64)
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(timeout=30)
        disk = json.loads((state / "jobs" / f"{job['id']}.json").read_text())
        assert disk["state"] == "running"  # what the dead process left
    finally:
        s.stop()
    s2 = start(tmp_path, state=state)
    try:
        st, rec = admin(s2, "GET", f"/jobs/{job['id']}")
        assert st == 200 and rec["state"] == "failed" and rec["error"] == "interrupted", rec
        assert rec["finished_at"] is not None and rec["activated"] is False
        assert outputs(tmp_path, "killed-out") == []  # no output, no temporary directory
        disk = json.loads((state / "jobs" / f"{job['id']}.json").read_text())
        assert disk["state"] == "failed" and disk["error"] == "interrupted"
        assert completion(s2)[0] == 200 and served_ids(s2) == ["tiny"]
        assert metrics(s2)['sparsed_admin_jobs{state="failed"}'] == 1
        # and it takes new jobs
        st, j2 = admin(s2, "POST", "/jobs", long_job(tmp_path / "after"))
        assert st == 202
        assert admin(s2, "DELETE", f"/jobs/{j2['id']}")[0] == 200
        assert wait_job(s2, j2["id"], finished, timeout=60)["state"] == "cancelled"
    finally:
        s2.stop()


def test_sigterm_mid_job(tmp_path):
    s = start(tmp_path)
    st, job = admin(s, "POST", "/jobs", long_job(tmp_path / "term-out"))
    assert st == 202
    wait_job(s, job["id"], lambda r: r["state"] == "running" and r["tokens"] > 0, timeout=60)
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=60) == 0
    s.stop()
    disk = json.loads((tmp_path / "state" / "jobs" / f"{job['id']}.json").read_text())
    assert disk["state"] == "failed" and disk["error"].startswith("interrupted")
    assert outputs(tmp_path, "term-out") == []
    time.sleep(0)
