#!/usr/bin/env python3
"""tools/gpu/think_cuda.py: a reasoning model's constrained replies through the daemon on a given
backend (default cuda), with only the standard library, for the GPU machine (no openai package).

The bundled model with tests/fixtures/templates/think.jinja (its prompt opens <think>) answers
three chat requests at temperature 0 with thinking_token_budget 4 and logprobs: free text, a JSON
schema with a bounded integer, and tool_choice "required". Each must come back with exactly its
first 4 tokens as reasoning_content, "</think>" next in the tokens, and the answer after it: the
schema's object with the integer in range, one call of an offered tool. Prints one line per check
and exits 1 if any failed.

    python3 tools/gpu/think_cuda.py --sparsed build/gpu/sparsed [--backend cuda]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "tiny"
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["age"],
          "properties": {"age": {"type": "integer", "minimum": 18, "maximum": 65}}}
TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
         {"type": "function", "function": {"name": "get_weather", "parameters": {
             "type": "object", "required": ["city"], "properties": {"city": {"type": "string", "maxLength": 8}}}}}]


def model_dir():
    d = pathlib.Path(tempfile.mkdtemp(prefix="think-"))
    for f in MODEL.iterdir():
        if f.name != "tokenizer_config.json":
            (d / f.name).symlink_to(f)
    cfg = json.loads((MODEL / "tokenizer_config.json").read_text())
    cfg["chat_template"] = (ROOT / "tests" / "fixtures" / "templates" / "think.jinja").read_text()
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return d


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparsed", default=str(ROOT / "build" / "sparsed"))
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--port", type=int, default=18631)
    a = ap.parse_args()
    proc = subprocess.Popen([a.sparsed, "serve", "--model", str(model_dir()), "--backend", a.backend,
                             "--port", str(a.port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ok = True
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{a.port}/ready", timeout=1)  # 503 while loading
                break
            except OSError:
                time.sleep(0.2)
        base = {"messages": [{"role": "user", "content": "def add(a, b):"}], "temperature": 0, "logprobs": True,
                "max_tokens": 80, "thinking_token_budget": 4}
        cases = [("free", {}),
                 ("schema", {"response_format": {"type": "json_schema",
                                                 "json_schema": {"name": "p", "schema": SCHEMA, "strict": True}}}),
                 ("tools", {"tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False})]
        for name, extra in cases:
            c = post(a.port, {**base, **extra})["choices"][0]
            m, toks = c["message"], [t["token"] for t in c["logprobs"]["content"]]
            good = m.get("reasoning_content") == "".join(toks[:4]) and "".join(toks[4:]).startswith("</think>")
            if name == "free":
                good = good and bool(m.get("content"))
            elif name == "schema":
                try:
                    good = good and c["finish_reason"] == "stop" and 18 <= json.loads(m["content"])["age"] <= 65
                except (ValueError, KeyError, TypeError):
                    good = False
            else:
                calls = m.get("tool_calls") or []
                good = good and len(calls) == 1 and calls[0]["function"]["name"] in ("get_time", "get_weather")
            ok &= good
            print(f"{name}: {'ok' if good else 'FAILED'} | reasoning {m.get('reasoning_content')!r} | "
                  f"content {m.get('content')!r} | calls {m.get('tool_calls')} | finish {c['finish_reason']}")
    finally:
        proc.terminate()
        err = proc.communicate(timeout=30)[1].decode(errors="replace")
        if not ok:
            print(err[-2000:])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
