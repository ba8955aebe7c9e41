"""Prefix caching through the API on the bundled model: a chat whose system prompt (and earlier
turn) the daemon has seen reports cached prompt tokens in usage, answers exactly as a daemon
with prefix_caching off does, and /metrics counts the hits; off, nothing is cached. And
`sparsed bench prefix`'s table."""
import json
import subprocess

from conftest import metric, sparsed_bin

SYSTEM = ("You are a careful reviewer of Python code. Answer in one short paragraph, then show the "
          "corrected function with type hints and a docstring. Never invent APIs.")
TURNS = ["def add(a, b): return a - b", "def first(xs): return xs[1]"]


def chat(srv, user, history=()):
    msgs = [{"role": "system", "content": SYSTEM}, *history, {"role": "user", "content": user}]
    status, _, body = srv.post("/v1/chat/completions",
                               {"model": "tiny", "messages": msgs, "max_tokens": 24, "temperature": 0})
    assert status == 200, body
    r = json.loads(body)
    return r["choices"][0]["message"]["content"], r["usage"]


def conversation(srv):
    """Two users with the same system prompt, then a second turn of the first: answers, usages."""
    out = []
    a1, u1 = chat(srv, TURNS[0])
    out.append((a1, u1))
    out.append(chat(srv, TURNS[1]))
    history = [{"role": "user", "content": TURNS[0]}, {"role": "assistant", "content": a1}]
    out.append(chat(srv, "And with floats?", history))
    return out


def test_cached_prompt_tokens_and_same_answers(start_server):
    on = start_server(args=["--kv-blocks", "256"])
    off = start_server(args=["--kv-blocks", "256", "--prefix-caching", "false"])
    got_on, got_off = conversation(on), conversation(off)
    for (a_on, u_on), (a_off, u_off) in zip(got_on, got_off):
        assert a_on == a_off  # greedy: the cache changes nothing but the work
        assert u_on["prompt_tokens"] == u_off["prompt_tokens"]
        assert u_off["prompt_tokens_details"]["cached_tokens"] == 0
    c = [u["prompt_tokens_details"]["cached_tokens"] for _, u in got_on]
    assert c[0] == 0  # nothing seen yet
    assert c[1] >= 16  # the system prompt's full blocks (block_size 16)
    assert c[2] > c[1]  # the whole first turn, answer included
    for (_, u) in got_on:
        assert u["prompt_tokens_details"]["cached_tokens"] < u["prompt_tokens"]
    assert metric(on, "sparsed_prefix_cache_hits_total") == sum(c)
    assert metric(on, "sparsed_prefix_cache_queries_total") >= sum(u["prompt_tokens"] for _, u in got_on)
    assert metric(on, "sparsed_kv_cache_blocks_cached") > 0
    assert metric(on, "sparsed_kv_cache_usage_ratio") == 0  # nothing held by a sequence
    assert metric(on, "sparsed_prefix_cache_evicted_blocks_total") == 0  # 256 blocks: room for all
    assert metric(on, "sparsed_prefix_cache_cold_insertion") == 0  # LRU while nothing is evicted
    assert metric(off, "sparsed_prefix_cache_hits_total") == 0
    assert metric(off, "sparsed_kv_cache_blocks_cached") == 0


def test_bench_prefix_table(tmp_path):
    """`sparsed bench prefix` on the cycling stream: LRU hits nothing where the prompts outgrow the
    pool, the adaptive rule hits; the table goes to --out too. Unknown streams are refused."""
    out = tmp_path / "prefix.md"
    r = subprocess.run([sparsed_bin(), "bench", "prefix", "--stream", "cycle", "--pool", "1000", "--requests",
                        "400", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [line.split("|") for line in r.stdout.splitlines() if line.startswith("| cycle |")]
    assert len(rows) == 1, r.stdout
    lru, adaptive = (float(rows[0][i].strip().rstrip("%")) for i in (3, 4))
    assert lru < 1 and adaptive > 30, rows[0]
    assert "| cycle | 1000 |" in out.read_text()
    r = subprocess.run([sparsed_bin(), "bench", "prefix", "--stream", "nope"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "unknown stream 'nope'" in r.stderr, r.stderr
