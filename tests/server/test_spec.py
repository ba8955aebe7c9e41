"""Speculative decoding by prompt lookup through the API on the bundled model: a daemon with
spec_tokens on answers repetitive code prompts with exactly the text of a daemon with it off
(greedy, streamed or not, and seeded sampling), and /metrics counts the drafts it ran and kept.
`sparsed bench spec` prints its table with every output the same."""
import json
import subprocess

from conftest import metric, sparsed_bin
from sse import completion_text, stream_request

PROMPTS = [
    "import unittest\n\n\nclass TestParse(unittest.TestCase):\n    def test_int(self):\n"
    "        self.assertEqual(parse(\"1\"), 1)\n\n    def test_float(self):\n"
    "        self.assertEqual(parse(\"1.5\"), 1.5)\n\n    def test_",
    "for i in range(10):\n    print(i)\nfor i in range(10):\n",
    "import numpy as np\n\n\ndef",
]


def complete(srv, prompt, **kw):
    req = {"model": "tiny", "prompt": prompt, "max_tokens": 48, "temperature": 0, **kw}
    status, _, body = srv.post("/v1/completions", req)
    assert status == 200, body
    return json.loads(body)["choices"][0]


def test_same_text_with_drafts(start_server):
    on = start_server(args=["--spec-tokens", "6", "--spec-ngram-min", "1"])
    off = start_server()
    for p in PROMPTS:
        a, b = complete(on, p), complete(off, p)
        assert a["text"] == b["text"] and a["finish_reason"] == b["finish_reason"]
        s = {"temperature": 0.6, "top_p": 0.9, "seed": 7, "frequency_penalty": 0.2}
        assert complete(on, p, **s)["text"] == complete(off, p, **s)["text"]
    drafted = metric(on, "sparsed_spec_draft_tokens_total")
    kept = metric(on, "sparsed_spec_accepted_tokens_total")
    assert drafted > 0 and 0 < kept <= drafted
    assert metric(off, "sparsed_spec_draft_tokens_total") == 0
    # fewer steps for the same tokens
    assert metric(on, "sparsed_engine_steps_total") < metric(off, "sparsed_engine_steps_total")


def test_draft_model(start_server):
    """The bundled model drafting for itself: greedy keeps every draft, the texts are unchanged."""
    on = start_server(args=["--spec-tokens", "4", "--spec-draft-model", "models/tiny"])
    off = start_server()
    for p in PROMPTS:
        assert complete(on, p)["text"] == complete(off, p)["text"]
    drafted = metric(on, "sparsed_spec_draft_tokens_total")
    assert drafted > 0 and metric(on, "sparsed_spec_accepted_tokens_total") == drafted
    s = {"temperature": 0.8, "seed": 11}
    assert complete(on, PROMPTS[2], **s)["text"] == complete(off, PROMPTS[2], **s)["text"]


def test_draft_model_refused(start_server):
    srv = start_server(args=["--spec-draft-model", "models/tiny"], ready=False)
    assert srv.proc.wait(timeout=30) != 0
    assert "spec_draft_model: needs spec_tokens" in srv.log_text()
    srv = start_server(args=["--spec-tokens", "2", "--spec-draft-model", "/nonexistent"], ready=False)
    assert srv.proc.wait(timeout=30) != 0
    assert "spec_draft_model" in srv.log_text()


def test_streamed_text_with_drafts(start_server):
    on = start_server(args=["--spec-tokens", "6"])
    want = complete(on, PROMPTS[0])["text"]
    req = {"model": "tiny", "prompt": PROMPTS[0], "max_tokens": 48, "temperature": 0, "stream": True}
    status, events = stream_request(on.port, "/v1/completions", req)
    assert status == 200
    assert completion_text(events) == want
    assert metric(on, "sparsed_spec_accepted_tokens_total") > 0


def test_bench_spec_table():
    r = subprocess.run([sparsed_bin(), "bench", "spec", "--gen", "24", "--rounds", "1", "--tokens", "4"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [ln.split("|")[1:-1] for ln in r.stdout.splitlines() if ln.startswith("| ")][2:]  # after the head
    assert [(c[0].strip(), c[1].strip()) for c in rows] == [
        (w, k) for w in ("similar-methods", "test-table", "free") for k in ("0", "4")]
    assert all(c[6].strip() == ("-" if c[1].strip() == "0" else "yes") for c in rows), r.stdout


def test_bench_spec_bad_args():
    for args in (["--tokens", "0"], ["--tokens", "17"], ["--gen", "0"], ["--backend", "tpu"],
                 ["--ngram-min", "3", "--ngram-max", "2"], ["--bogus"]):
        r = subprocess.run([sparsed_bin(), "bench", "spec", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (args, r)
        assert "usage: sparsed bench spec" in r.stderr
    r = subprocess.run([sparsed_bin(), "bench", "spec", "--prompt-file", "/nonexistent/prompt.txt"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot read /nonexistent/prompt.txt" in r.stderr, r
