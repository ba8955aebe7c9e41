"""Lifecycle: SIGTERM drains in-flight streams then exits 0, the grace period is enforced,
SIGHUP reloads API keys and the log level, start-up rejects bad config, /metrics adds up and, with
the cuda backend on a GPU, reports the GPU's memory, clocks and power."""
import json
import signal
import subprocess
import threading
import time

import pytest
from conftest import ROOT, free_port, gpu_count, sparsed_bin
from sse import completion_text, stream_request
from test_load import metric, open_stream, run_threads


def test_sigterm_drains_20_streams(start_server):
    s = start_server(["--max-seqs", "8", "--drain-timeout", "60"])
    results = [None] * 20

    def one(i):
        st, ev = stream_request(s.port, "/v1/completions", {"prompt": f"def f{i}(", "max_tokens": 40,
                                                            "ignore_eos": True, "temperature": 0, "stream": True})
        assert st == 200, ev
        completion_text(ev)  # well-formed, ends with [DONE]
        results[i] = json.loads(ev[-2])["choices"][0]["finish_reason"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    deadline = time.time() + 20
    while metric(s, "sparsed_num_requests_running") + metric(s, "sparsed_num_requests_waiting") < 20:
        assert time.time() < deadline
        time.sleep(0.02)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    if s.proc.poll() is None:  # still draining: not ready, new work refused
        st, _, body = s.get("/ready")
        assert st == 503
        st, _, body = s.post("/v1/completions", {"prompt": "a", "max_tokens": 1})
        assert st == 503 and json.loads(body)["error"]["code"] == "shutting_down"
    for t in threads:
        t.join(60)
    assert results == ["length"] * 20  # every stream ran to its full length
    assert s.proc.wait(60) == 0
    assert time.time() - t0 < 60
    log = s.log_text()
    assert "SIGTERM" in log and "drained" in log


def test_sigterm_grace_period(start_server):
    s = start_server(["--max-seqs", "1", "--drain-timeout", "1"])
    c = open_stream(s.port, {"prompt": "def", "max_tokens": 1500, "ignore_eos": True, "stream": True})
    c.settimeout(30)
    assert c.recv(10)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(30) == 0
    assert time.time() - t0 < 10
    data = b""
    while True:  # the stream was closed by the server
        b = c.recv(65536)
        if not b:
            break
        data += b
    assert b"data: " in data
    assert "drain timeout" in s.log_text()


def test_sighup_reloads_keys_and_level(start_server, tmp_path):
    cfg = {"api_keys": ["key-one-secret"], "log_level": "info"}
    s = start_server(config=cfg)
    auth = lambda k: {"Authorization": f"Bearer {k}"}
    body = {"prompt": "a", "max_tokens": 1}
    assert s.post("/v1/completions", body, headers=auth("key-one-secret"))[0] == 200
    assert s.post("/v1/completions", body, headers=auth("key-two-secret"))[0] == 401
    keyfile = tmp_path / "keys.txt"
    keyfile.write_text("# operators\nkey-three-secret\n\n")
    s.config_path.write_text(json.dumps({"api_keys": ["key-two-secret"], "api_key_file": str(keyfile),
                                         "log_level": "warn"}))
    s.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while s.post("/v1/completions", body, headers=auth("key-two-secret"))[0] != 200:
        assert time.time() < deadline
        time.sleep(0.1)
    assert s.post("/v1/completions", body, headers=auth("key-three-secret"))[0] == 200
    assert s.post("/v1/completions", body, headers=auth("key-one-secret"))[0] == 401
    log = s.log_text()
    assert "log_level info -> warn" in log and "API keys reloaded" in log
    assert "secret" not in log  # keys are never logged
    # a broken config on reload is reported and the old settings stay
    s.config_path.write_text("{not json")
    s.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert s.post("/v1/completions", body, headers=auth("key-two-secret"))[0] == 200
    assert "config not reloaded" in s.log_text()


def serve_once(args, cwd="/"):
    """One `sparsed serve` run, by default from a directory without config/sparsed.json."""
    return subprocess.run([sparsed_bin(), "serve", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_startup_config_errors(tmp_path):
    bad = tmp_path / "bad.json"
    for cfg, word in [({"max_seqs": 4, "frobnicate": 1}, "frobnicate"), ({"port": "eighty"}, "port"),
                      ({"max_seqs": 0}, "max_seqs"), ({"backend": "tpu"}, "backend"),
                      ({"log_level": "loud"}, "log_level"), ({"api_keys": [1]}, "api_keys"),
                      ({"backend": "cuda", "max_seqs": 300}, "at most 256 with the cuda backend"),
                      ({"warmup": "yes"}, "warmup")]:
        bad.write_text(json.dumps(cfg))
        r = serve_once(["--config", str(bad)])
        assert r.returncode == 2 and word in r.stderr, (cfg, r.stderr)
    bad.write_text("{")
    r = serve_once(["--config", str(bad)])
    assert r.returncode == 2 and "bad.json" in r.stderr
    for args, word in [(["--max-seqs", "x"], "--max-seqs"), (["--no-such-flag", "1"], "--no-such-flag"),
                       (["--port"], "--port"), (["--config", str(tmp_path / "missing.json")], "missing.json")]:
        r = serve_once(args)
        assert r.returncode == 2 and word in r.stderr, (args, r.stderr)
    r = serve_once(["--model", str(tmp_path / "nomodel"), "--port", str(free_port())])
    assert r.returncode != 0


def test_help_and_print_config(tmp_path):
    r = serve_once(["--help"])
    assert r.returncode == 0
    for flag in ["--model", "--host", "--port", "--api-key", "--api-key-file", "--threads", "--max-seqs",
                 "--max-batch-tokens", "--max-queue", "--max-model-len", "--kv-blocks", "--backend",
                 "--log-level", "--drain-timeout", "--max-body-bytes", "--request-timeout",
                 "--served-model-name", "--config", "--print-config"]:
        assert flag in r.stdout, flag
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"_comment": "annotations are allowed", "max_seqs": 3, "port": 9001,
                               "api_keys": ["top-secret"]}))
    r = serve_once(["--config", str(cfg), "--port", "9002", "--print-config"])
    assert r.returncode == 0, r.stderr
    eff = json.loads(r.stdout)
    assert eff["max_seqs"] == 3 and eff["port"] == 9002 and "top-secret" not in r.stdout
    # the shipped default config is valid and documents every key it sets
    shipped = json.loads((ROOT / "config" / "sparsed.json").read_text())
    r = serve_once(["--config", str(ROOT / "config" / "sparsed.json"), "--print-config"])
    assert r.returncode == 0, r.stderr
    assert {k for k in shipped if not k.startswith("_")} == set(json.loads(r.stdout))
    readme = (ROOT / "config" / "README.md").read_text()
    for k in json.loads(r.stdout):
        assert f"`{k}`" in readme, k


def metric_values(s):
    values = {}
    for line in s.get("/metrics")[2].decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            values[k] = float(v)
    return values


def test_metrics_add_up(start_server):
    s = start_server()
    usage = [0, 0]
    for p in ["def", "import os", "class A:"]:
        st, _, body = s.post("/v1/completions", {"prompt": p, "max_tokens": 5, "temperature": 0})
        u = json.loads(body)["usage"]
        usage[0] += u["prompt_tokens"]
        usage[1] += u["completion_tokens"]
    s.post("/v1/completions", b"{")
    values = metric_values(s)
    assert values['sparsed_http_requests_total{route="/v1/completions",status="200"}'] == 3
    assert values['sparsed_http_requests_total{route="/v1/completions",status="400"}'] == 1
    assert values["sparsed_prompt_tokens_total"] == usage[0]
    assert values["sparsed_generation_tokens_total"] == usage[1]
    assert values["sparsed_e2e_request_latency_seconds_count"] == 3
    assert values["sparsed_time_to_first_token_seconds_count"] == 3
    assert values["sparsed_inter_token_latency_seconds_count"] == usage[1] - 3
    assert values['sparsed_e2e_request_latency_seconds_bucket{le="+Inf"}'] == 3
    assert 0 <= values["sparsed_kv_cache_usage_ratio"] <= 1 and values["sparsed_ready"] == 1


def test_metrics_gpu_gauges(start_server):
    """--backend cuda: device memory (cudaMemGetInfo) and the GPU's SM clock, power, temperature and
    clock-slowdown flags (NVML, engine/gpu_sensor.c) for GPU 0, with physical values."""
    if gpu_count() < 1:
        pytest.skip("no GPU (nvidia-smi -L lists none)")
    s = start_server(["--backend", "cuda"])
    st, _, body = s.post("/v1/completions", {"prompt": "def", "max_tokens": 4, "temperature": 0})
    assert st == 200, body
    v = metric_values(s)
    g = '{gpu="0"}'
    assert v["sparsed_gpu_memory_used_bytes" + g] > 0
    assert v["sparsed_gpu_memory_total_bytes" + g] >= v["sparsed_gpu_memory_used_bytes" + g]
    assert 100 <= v["sparsed_gpu_sm_clock_mhz" + g] <= 5000, v
    assert 1 < v["sparsed_gpu_power_watts" + g] < 3000, v
    assert 1 <= v["sparsed_gpu_temperature_celsius" + g] <= 120, v
    assert v["sparsed_gpu_power_capped" + g] in (0, 1) and v["sparsed_gpu_thermal_slowdown" + g] in (0, 1)


def test_log_lines(start_server):
    s = start_server(["--log-priority-prefix", "--log-level", "info"])
    st, headers, body = s.post("/v1/completions", {"prompt": "def", "max_tokens": 3, "temperature": 0})
    rid = headers["X-Request-Id"]
    assert st == 200 and json.loads(body)["id"] == "cmpl-" + rid
    s.post("/v1/completions", b"{")
    time.sleep(0.2)
    lines = s.log_text().splitlines()
    assert lines and all(line[:3] in ("<6>", "<4>", "<3>") for line in lines), lines  # journald priorities
    mine = [line for line in lines if f"[{rid}]" in line]
    assert len(mine) == 1 and "POST /v1/completions 200" in mine[0] and "generated_tokens=3" in mine[0]
    assert any("-> 400" in line for line in lines)


def test_second_signal_exits_with_work_in_flight(start_server):
    s = start_server(["--max-seqs", "2", "--drain-timeout", "60"])
    body = {"prompt": "def", "max_tokens": 1500, "ignore_eos": True}
    socks = [open_stream(s.port, {**body, "stream": i % 2 == 0}) for i in range(6)]
    deadline = time.time() + 20
    while metric(s, "sparsed_num_requests_running") + metric(s, "sparsed_num_requests_waiting") < 6:
        assert time.time() < deadline
        time.sleep(0.05)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    s.proc.send_signal(signal.SIGINT)
    assert s.proc.wait(30) == 0  # no crash while tearing down streams, waiting and suspended requests
    for c in socks:
        c.settimeout(10)
        while c.recv(65536):  # every connection gets closed
            pass
        c.close()
    assert "again: exiting without waiting" in s.log_text()
