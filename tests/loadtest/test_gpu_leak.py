"""Issue #4: no memory leak across 10 000 requests of mixed lengths on the CUDA backend. The
daemon serves models/tiny with --backend cuda; loadtest/sdload.py sends streamed completions
(long prompts among short ones, clients that hang up mid-stream), streamed chat, shared-prefix
prompts, non-streamed requests and bursts past the queue (429s). Afterwards device memory
(sparsed_gpu_memory_used_bytes, i.e. cudaMemGetInfo), KV blocks in use, open fds and RSS must be
back at their warmed-up baseline. Skips without a GPU.

  SD_GPU_LEAK_REQUESTS (10000)  requests in all;  SD_GPU_LEAK_SLACK_MB (8) device-memory slack
  SD_GPU_LEAK_OUT  a directory: each phase's sdload JSON and a summary are written there"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from sdserver import ROOT, Server, fd_count, metrics, wait_idle

SDLOAD = ROOT / "loadtest" / "sdload.py"
MAX_SEQS, MAX_QUEUE = 32, 128
GPU_USED = 'sparsed_gpu_memory_used_bytes{gpu="0"}'


def have_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    r = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return r.returncode == 0 and "GPU" in r.stdout


pytestmark = pytest.mark.skipif(not have_gpu(), reason="no GPU (nvidia-smi -L lists none): CUDA leak test skipped")


def sdload(s, out_dir, name, *args):
    """One sdload phase; returns its run summary. Fails on any failed (non-429, non-cancelled) request."""
    out = out_dir / f"gpu-leak-{name}.json"
    cmd = [sys.executable, str(SDLOAD), "--base-url", s.url, "--progress-interval", "0", "--quiet",
           "--result-json", str(out), "--timeout", "300", "--seed", str(len(name)), *map(str, args)]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert out.exists(), f"sdload {name} wrote no result (rc={r.returncode}):\n{r.stdout}\n{r.stderr}"
    (run,) = json.loads(out.read_text())["runs"]
    print(f"{name}: {run['sent']} sent, {run['completed']} ok, {run['cancelled']} cancelled, "
          f"{run['rejected_429']} x 429, {run['failed']} failed, {time.time() - t0:.1f}s, "
          f"{run['output_throughput']:.0f} tok/s", flush=True)
    assert run["failed"] == 0, (name, run["errors"], run["http_status"], r.stderr[-2000:])
    return run


def snapshot(s):
    """(device bytes in use, fds, RSS kB, metrics) once the engine is idle."""
    m = wait_idle(s, timeout=120)
    time.sleep(1.0)  # connections just closed are reaped
    m = metrics(s)
    return m.get(GPU_USED), fd_count(s), s.proc_status("VmRSS"), m


@pytest.fixture
def cuda_server(tmp_path):
    s = Server(tmp_path, ["--backend", "cuda", "--max-seqs", MAX_SEQS, "--max-queue", MAX_QUEUE,
                          "--http-threads", 2, "--log-level", "info"])
    try:
        yield s.wait_ready(timeout=300)
    finally:
        s.stop()


def test_gpu_no_leak_over_10k_mixed_requests(cuda_server, tmp_path):
    s = cuda_server
    total = int(os.environ.get("SD_GPU_LEAK_REQUESTS", "10000"))
    slack = float(os.environ.get("SD_GPU_LEAK_SLACK_MB", "8")) * 2**20
    out_dir = pathlib.Path(os.environ.get("SD_GPU_LEAK_OUT") or tmp_path)
    out_dir.mkdir(parents=True, exist_ok=True)

    def n(frac):
        return max(8, int(total * frac))

    # Warm-up over every path (lazy cuBLAS workspaces, longest prefill, host arenas).
    sdload(s, out_dir, "warmup", "--num-prompts", 96, "--concurrency", MAX_SEQS, "--dataset", "mixed",
           "--input-len", 24, "--long-input-len", 900, "--long-fraction", 0.3, "--output-len", 24,
           "--range-ratio", 0.9, "--cancel-fraction", 0.2)
    sdload(s, out_dir, "warmup-chat", "--endpoint", "/v1/chat/completions", "--num-prompts", 32, "--concurrency",
           16, "--output-len", 8, "--no-stream")
    gpu0, fds0, rss0, m0 = snapshot(s)
    assert gpu0 is not None and gpu0 > 0, "no sparsed_gpu_memory_used_bytes on /metrics with --backend cuda"
    blocks = m0["sparsed_kv_cache_blocks_total"]
    assert blocks > 0 and m0["sparsed_kv_cache_usage_ratio"] == 0
    print(f"baseline: gpu {gpu0 / 2**20:.1f} MiB, fds {fds0}, rss {rss0} kB, kv blocks {blocks:.0f}")

    runs = [
        sdload(s, out_dir, "completions", "--num-prompts", n(0.40), "--request-rate", "inf", "--max-concurrency",
               64, "--dataset", "mixed", "--input-len", 32, "--range-ratio", 0.9, "--long-input-len", 900,
               "--long-fraction", 0.1, "--output-len", 24, "--ignore-eos", "--cancel-fraction", 0.1,
               "--cancel-after", 12),
        sdload(s, out_dir, "chat", "--endpoint", "/v1/chat/completions", "--num-prompts", n(0.25),
               "--concurrency", 48, "--dataset", "mixed", "--input-len", 16, "--long-input-len", 400,
               "--long-fraction", 0.15, "--output-len", 16, "--range-ratio", 0.9, "--cancel-fraction", 0.15),
        sdload(s, out_dir, "prefix", "--num-prompts", n(0.15), "--concurrency", 32, "--dataset", "shared-prefix",
               "--prefix-len", 128, "--num-prefixes", 4, "--input-len", 16, "--output-len", 12, "--range-ratio",
               0.5, "--cancel-fraction", 0.05),
        sdload(s, out_dir, "nostream", "--num-prompts", n(0.10), "--concurrency", 16, "--input-len", 40,
               "--range-ratio", 0.9, "--output-len", 20, "--no-stream"),
    ]
    for r in runs:
        assert r["rejected_429"] == 0, ("429 below the queue limit", r["http_status"])
    # Bursts past the queue, kept under the default per-IP connection limit (256): the admitted
    # ones complete, the rest get 429. A 429 is allowed there, not required: on an H200 the tiny
    # model finishes requests about as fast as a burst arrives, so the queue may never fill.
    rest = max(0, total - sum(r["sent"] for r in runs))
    burst = 240
    i = 0
    while rest > 0:
        k = min(burst, rest)
        runs.append(sdload(s, out_dir, f"burst-{i}", "--num-prompts", k, "--request-rate", "inf", "--input-len",
                           16, "--range-ratio", 0.5, "--output-len", 8, "--cancel-fraction", 0.1))
        assert set(runs[-1]["http_status"]) <= {"200", "429"}, runs[-1]["http_status"]
        assert runs[-1]["failed"] == 0, runs[-1]
        rest -= k
        i += 1
        time.sleep(0.5)  # the last burst's connections are gone before the next opens 240 (per-IP limit 256)
    sent = sum(r["sent"] for r in runs)
    assert sent >= total, (sent, total)

    gpu1, fds1, rss1, m1 = snapshot(s)
    summary = {"requests": sent, "completed": sum(r["completed"] for r in runs),
               "cancelled": sum(r["cancelled"] for r in runs), "rejected_429": sum(r["rejected_429"] for r in runs),
               "gpu_used_bytes": [gpu0, gpu1], "fds": [fds0, fds1], "rss_kb": [rss0, rss1],
               "kv_usage_ratio": m1["sparsed_kv_cache_usage_ratio"]}
    (out_dir / "gpu-leak-summary.json").write_text(json.dumps(summary, indent=1))
    print(f"after {sent} requests: gpu {gpu0 / 2**20:.1f} -> {gpu1 / 2**20:.1f} MiB, fds {fds0} -> {fds1}, "
          f"rss {rss0} -> {rss1} kB, kv usage {m1['sparsed_kv_cache_usage_ratio']}")
    assert m1["sparsed_num_requests_running"] == 0 and m1["sparsed_num_requests_waiting"] == 0
    assert m1["sparsed_kv_cache_usage_ratio"] == 0, "KV blocks still in use after every request ended"
    assert m1["sparsed_kv_cache_blocks_total"] == blocks
    errors = {k: v for k, v in m1.items() if k.startswith('sparsed_http_requests_total{route="/v1') and 'status="5' in k}
    assert not errors, (errors, s.log_text()[-3000:])
    assert gpu1 <= gpu0 + slack, f"device memory grew by {(gpu1 - gpu0) / 2**20:.1f} MiB over {sent} requests"
    deadline = time.time() + 20
    while fd_count(s) > fds0 and time.time() < deadline:
        time.sleep(0.2)
    assert fd_count(s) <= fds0, (fds0, sorted(os.listdir(f"/proc/{s.proc.pid}/fd")))
    assert rss1 <= rss0 * 1.10 + 32 * 1024, (rss0, rss1)
    st, _, body = s.post("/v1/completions", {"prompt": "def", "max_tokens": 2})
    assert st == 200 and json.loads(body)["usage"]["completion_tokens"] == 2
