#!/usr/bin/env python3
"""tools/gpu/spec_serve.py: the daemon with speculative decoding on a GPU backend — starts
`sparsed serve --spec-tokens K` (warm-up included: the drafts' graphs are captured before ready),
asks a repetitive code prompt greedily with and without streaming, and prints the texts' match, the
draft counters of /metrics and the warm-up's log line. Exit status 0 when the texts match and
drafts were kept."""
import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request

PROMPT = ("import unittest\n\n\nclass TestParse(unittest.TestCase):\n    def test_int(self):\n"
          "        self.assertEqual(parse(\"1\"), 1)\n\n    def test_float(self):\n"
          "        self.assertEqual(parse(\"1.5\"), 1.5)\n\n    def test_")


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparsed", default="build/gpu/sparsed")
    ap.add_argument("--model", default="models/tiny")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--spec-tokens", default="4")
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--draft-model", default="", help="spec_draft_model (default: the prompt lookup)")
    a = ap.parse_args()
    log = open("/tmp/spec_serve.log", "w")
    p = subprocess.Popen([a.sparsed, "serve", "--model", a.model, "--backend", a.backend, "--port", str(a.port),
                          "--spec-tokens", a.spec_tokens, "--max-seqs", "8"]
                         + (["--spec-draft-model", a.draft_model] if a.draft_model else []), stdout=log, stderr=log)
    base = f"http://127.0.0.1:{a.port}"
    ok = False
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/ready", timeout=2)
                break
            except Exception:
                time.sleep(0.2)
        body = {"model": a.model.rstrip("/").split("/")[-1], "prompt": PROMPT, "max_tokens": 128, "temperature": 0}
        t0 = time.time()
        plain = json.loads(post(base + "/v1/completions", body))["choices"][0]["text"]
        dt = time.time() - t0
        streamed = ""
        for line in post(base + "/v1/completions", {**body, "stream": True}).splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                streamed += json.loads(line[6:])["choices"][0]["text"]
        metrics = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
        m = {k: float(v) for k, v in re.findall(r"^(sparsed_spec_\w+|sparsed_engine_steps_total) (\S+)$",
                                                  metrics, re.M)}
        print(f"128 tokens in {dt:.3f} s; streamed == plain: {streamed == plain}; {m}")
        ok = streamed == plain and m.get("sparsed_spec_accepted_tokens_total", 0) > 0
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()
    for line in open("/tmp/spec_serve.log"):
        if "warm" in line or "rror" in line:
            print(line.rstrip())
    print("spec_serve:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
