"""sdload's own correctness: its statistics against NumPy, its token counts against the server's
Prometheus counters, its timing invariants, and its handling of 429s and cancellations."""
import json
import random
import subprocess
import sys

import pytest

from sdserver import ROOT, Server, metrics, wait_idle

sys.path.insert(0, str(ROOT / "loadtest"))
import sdload_stats as stats  # noqa: E402

SDLOAD = ROOT / "loadtest" / "sdload.py"


def test_percentiles_match_numpy():
    np = pytest.importorskip("numpy")
    rng = random.Random(3)
    for n in (1, 2, 7, 100, 1001):
        xs = [rng.expovariate(1.0) for _ in range(n)]
        d = stats.dist(xs, scale=1.0)
        assert d["median"] == pytest.approx(np.percentile(xs, 50))
        for p in (90, 99):
            assert d[f"p{p}"] == pytest.approx(np.percentile(xs, p))
        assert d["mean"] == pytest.approx(np.mean(xs)) and d["std"] == pytest.approx(np.std(xs))


def test_goodput_counts_requests_meeting_every_slo():
    rs = [stats.Result(ok=True, status=200, ttft=t, latency=t + 0.1 * (k - 1), output_tokens=k)
          for t, k in ((0.1, 5), (0.5, 5), (0.1, 50), (0.2, 1))]
    s = stats.summarize(rs, 2.0, stats.parse_slos(["ttft:300", "e2el:1000"]))
    want = [r for r in rs if r.ttft <= 0.3 and r.latency <= 1.0]
    assert s["good_requests"] == len(want) and s["goodput"] == pytest.approx(len(want) / 2.0)
    with pytest.raises(ValueError):
        stats.parse_slos(["ttfx:3"])


def run(url, tmp_path, *args):
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(SDLOAD), "--base-url", url, "--quiet", "--progress-interval", "0",
                        "--save-requests", "--result-json", str(out), *map(str, args)],
                       capture_output=True, text=True, timeout=300)
    return r, json.loads(out.read_text())["runs"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("sdload"), ["--max-seqs", "4", "--max-queue", "6"])
    try:
        yield s.wait_ready()
    finally:
        s.stop()


def test_token_counts_agree_with_server_metrics(daemon, tmp_path):
    m0 = metrics(daemon)
    r, (run_,) = run(daemon.url, tmp_path, "--num-prompts", 12, "--concurrency", 3, "--input-len", 20,
                     "--output-len", 6, "--ignore-eos", "--endpoint", "/v1/chat/completions")
    assert r.returncode == 0, r.stderr
    m1 = wait_idle(daemon)
    assert run_["completed"] == 12 and run_["failed"] == 0
    assert run_["total_output_tokens"] == m1["sparsed_generation_tokens_total"] - m0["sparsed_generation_tokens_total"]
    assert run_["total_input_tokens"] == m1["sparsed_prompt_tokens_total"] - m0["sparsed_prompt_tokens_total"]
    assert run_["total_output_tokens"] == 12 * 6
    for q in run_["requests"]:  # one gap per later text-carrying chunk (a token may release no text)
        assert 0 < q["ttft"] <= q["latency"] and 1 <= len(q["itl"]) <= q["output_tokens"] - 1 == 5
        assert q["ttft"] + sum(q["itl"]) <= q["latency"] + 1e-6


def test_rejections_and_cancellations_are_not_failures(daemon, tmp_path):
    r, (run_,) = run(daemon.url, tmp_path, "--num-prompts", 40, "--request-rate", "inf", "--output-len", 12,
                     "--ignore-eos", "--cancel-fraction", 0.7, "--cancel-after", 3)
    assert r.returncode == 0, r.stderr
    assert run_["failed"] == 0 and run_["rejected_429"] > 0 and run_["cancelled"] > 0
    assert run_["http_status"].get("429") == run_["rejected_429"]
    assert run_["completed"] + run_["cancelled"] + run_["rejected_429"] == 40
    for q in run_["requests"]:
        if q["cancelled"]:
            assert 1 <= q["output_tokens"] <= 3
    assert wait_idle(daemon)["sparsed_kv_cache_usage_ratio"] == 0


def test_failures_are_counted_and_set_the_exit_status(daemon, tmp_path):
    r, (run_,) = run(daemon.url, tmp_path, "--num-prompts", 3, "--model", "no-such-model")
    assert r.returncode == 1 and run_["failed"] == 3 and run_["http_status"] == {"404": 3}
