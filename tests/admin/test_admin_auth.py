"""Admin API access and input checks: the admin token (not an API key) is required, the API is
off without a token, malformed job specs and swap requests get 400 naming the field, and the
server keeps serving through all of it."""
import json
import os

import pytest

from admin_helpers import ADMIN, KEY, ROOT, admin, completion, served_ids, start

ROUTES = [("GET", "/jobs", None), ("POST", "/jobs", {"output": "/tmp/x"}), ("GET", "/jobs/job-1", None),
          ("DELETE", "/jobs/job-1", None), ("GET", "/model", None), ("POST", "/model", {"path": "models/tiny"})]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start(tmp_path_factory.mktemp("adm"))
    yield s
    s.stop()


def check_error(st, body, status, param="-"):
    assert st == status, (st, body)
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param != "-":
        assert err["param"] == param, err
    return err


@pytest.mark.parametrize("method,path,body", ROUTES)
def test_token_required(server, method, path, body):
    for token in (None, "wrong-token", KEY, ADMIN + "x", ADMIN[:-1]):
        st, b = admin(server, method, path, body, token=token)
        check_error(st, b, 401)
    # the admin token opens the route (whatever the route then answers), and never in the log
    st, _ = admin(server, method, path, body)
    assert st != 401
    assert ADMIN not in server.log_text()


def test_api_key_still_required_on_v1(server):
    st, _ = completion(server)
    assert st == 200
    # the admin token is not an API key either
    from admin_helpers import http
    st, _, _ = http("POST", server.url + "/v1/completions", {"prompt": "a", "max_tokens": 1},
                    headers={"Authorization": f"Bearer {ADMIN}"})
    assert st == 401


def test_disabled_without_token(tmp_path):
    s = start(tmp_path, admin=None)
    try:
        for method, path, body in ROUTES:
            for token in (ADMIN, None):
                st, b = admin(s, method, path, body, token=token)
                err = check_error(st, b, 404)
                assert "admin_token" in err["message"]
        assert completion(s)[0] == 200
        assert not (tmp_path / "state").exists()  # no job store without the admin API
    finally:
        s.stop()


def test_token_equal_to_an_api_key_refused(tmp_path):
    s = start(tmp_path, admin=KEY, ready=False)
    assert s.proc.wait(timeout=30) != 0
    assert "admin_token" in s.log_text()
    s.logf.close()


def test_token_file(tmp_path):
    tf = tmp_path / "admin.token"
    tf.write_text("# the admin token\n\nfrom-a-file\n")
    s = start(tmp_path, admin=None, args=["--admin-token-file", tf])
    try:
        assert admin(s, "GET", "/model", token="from-a-file")[0] == 200
        assert admin(s, "GET", "/model", token=ADMIN)[0] == 401
    finally:
        s.stop()


def bad_specs(tmp):
    ok = {"prompts": ["def f(x):"], "tokens_budget": 16, "output": str(tmp / "out-ok")}
    (tmp / "exists").mkdir(exist_ok=True)
    (tmp / "afile").write_text("x")
    pruned = tmp / "pruned-ckpt"
    pruned.mkdir(exist_ok=True)
    (pruned / "config.json").write_text((ROOT / "models" / "tiny" / "config.json").read_text())
    (pruned / "sparsity.json").write_text("{}")
    cases = [
        ({"pattern": "3:4"}, "pattern"), ({"pattern": 24}, "pattern"), ({"solver": "obs"}, "solver"),
        ({"source": "web"}, "source"), ({"mode": "twice"}, "mode"), ({"type": "quantize"}, "type"),
        ({"model": str(tmp / "no-such-model")}, "model"), ({"model": str(tmp / "exists")}, "model"),
        ({"model": str(pruned)}, "model"), ({"model": 7}, "model"),
        ({"output": str(tmp / "missing-parent" / "out")}, "output"), ({"output": str(tmp / "afile" / "out")}, "output"),
        ({"output": str(tmp / "exists")}, "output"), ({"output": ""}, "output"), ({"output": None}, "output"),
        ({"tokens_budget": 0}, "tokens_budget"), ({"tokens_budget": -5}, "tokens_budget"),
        ({"tokens_budget": 10 ** 12}, "tokens_budget"), ({"tokens_budget": "100"}, "tokens_budget"),
        ({"tokens_budget": 1.5}, "tokens_budget"), ({"activate": "yes"}, "activate"),
        ({"prompts": []}, "prompts"), ({"prompts": [3]}, "prompts"), ({"prompts": "def f():"}, "prompts"),
        ({"prompts": None}, "prompts"), ({"prompts": None, "prompts_file": str(tmp / "nope.jsonl")}, "prompts_file"),
        ({"prompts": None, "prompts_file": str(tmp)}, "prompts_file"),
        ({"prompts_file": str(tmp)}, "prompts"),  # both prompts and prompts_file
        ({"source": "text"}, "prompts"), ({"source": "text", "prompts": None}, "text_file"),
        ({"source": "text", "prompts": None, "text_file": str(tmp / "nope.txt")}, "text_file"),
        ({"max_new_tokens": 0}, "max_new_tokens"), ({"temperature": "hot"}, "temperature"),
        ({"threads": -1}, "threads"), ({"tokens_budjet": 10}, "tokens_budjet"),
    ]
    out = []
    for patch, param in cases:
        spec = {**ok, **patch}
        out.append(({k: v for k, v in spec.items() if v is not None or k != "prompts"}, param))
    if os.geteuid() != 0:  # root writes anywhere: the read-only case only means something for others
        ro = tmp / "readonly"
        ro.mkdir(exist_ok=True)
        ro.chmod(0o555)
        out.append(({**ok, "output": str(ro / "out")}, "output"))
    return out


def test_malformed_job_specs(server, tmp_path):
    for spec, param in bad_specs(tmp_path):
        st, b = admin(server, "POST", "/jobs", spec)
        err = check_error(st, b, 400, param)
        assert param.split("_")[0] in err["message"], (spec, err)
    for raw in (b"not json", b"[1, 2]", b"", b'{"output": "a", "output": "b"}'):
        from admin_helpers import http
        st, _, body = http("POST", server.url + "/admin/v1/jobs", raw,
                           headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"})
        check_error(st, json.loads(body), 400)
    # nothing was queued, nothing written, and the server still serves
    st, lst = admin(server, "GET", "/jobs")
    assert st == 200 and lst["object"] == "list" and lst["data"] == []
    assert not (tmp_path / "out-ok").exists()
    assert completion(server)[0] == 200


def test_bad_routes_and_ids(server):
    check_error(*admin(server, "GET", "/jobs/job-000000000000"), 404, "id")
    check_error(*admin(server, "DELETE", "/jobs/job-000000000000"), 404, "id")
    check_error(*admin(server, "GET", "/nothing"), 404)
    from admin_helpers import http
    for method, path, allow in (("PUT", "/jobs", "GET, HEAD, POST"), ("DELETE", "/model", "GET, HEAD, POST"),
                                ("POST", "/jobs/job-000000000000", "GET, HEAD, DELETE")):
        st, hdr, body = http(method, server.url + "/admin/v1" + path, {} if method != "DELETE" else None,
                             headers={"Authorization": f"Bearer {ADMIN}"})
        check_error(st, json.loads(body), 405)
        assert hdr.get("Allow") == allow, hdr


def test_failed_swap_keeps_the_model(server, tmp_path):
    before = served_ids(server)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    for body, param in (({"path": str(tmp_path / "absent")}, "path"), ({"path": str(broken)}, "path"),
                        ({}, "path"), ({"path": 3}, "path"), ({"path": "models/tiny", "name": 5}, "name")):
        st, b = admin(server, "POST", "/model", body)
        check_error(st, b, 400, param)
    st, b = admin(server, "POST", "/model", {"path": "models/tiny", "extra": 1})
    check_error(st, b, 400)
    assert served_ids(server) == before
    st, info = admin(server, "GET", "/model")
    assert st == 200 and info["name"] == before[0] and info["sparsity"] == "dense"
    assert completion(server)[0] == 200


def test_job_memory_budget(tmp_path):
    s = start(tmp_path, args=["--job-memory-budget", "1"])  # MiB: less than any model needs
    try:
        spec = {"prompts": ["def f(x):"], "tokens_budget": 16, "output": str(tmp_path / "o")}
        st, b = admin(s, "POST", "/jobs", spec)
        err = check_error(st, b, 400, "model")
        assert "job_memory_budget" in err["message"] and "sequential" in err["message"]
        assert admin(s, "GET", "/jobs")[1]["data"] == []
    finally:
        s.stop()
    s = start(tmp_path, args=["--job-memory-budget", "100000"])
    try:
        st, b = admin(s, "POST", "/jobs", {**spec, "tokens_budget": 100000, "max_new_tokens": 512})
        assert st == 202 and b["memory_estimate_bytes"] > 1 << 20
        assert admin(s, "DELETE", f"/jobs/{b['id']}")[0] == 200
    finally:
        s.stop()
