#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (fuzz/corpus/<target>/) from the repository's own assets:
valid inputs of every shape the parsers accept, plus a few near misses. Deterministic; run it
from the repository root after changing an asset. Regression inputs (crashes found and fixed)
live beside these as regress-*, and this script leaves them alone."""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fuzz" / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def api_seeds():
    comp = [
        {"prompt": "def f(x):", "max_tokens": 8},
        {"model": "tiny", "prompt": ["a", "b"], "max_tokens": 4, "n": 2, "temperature": 0.7, "top_p": 0.9,
         "stop": ["\n", "#"], "seed": 7, "logprobs": 2, "echo": True},
        {"prompt": [1, 2, 3], "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True},
        {"prompt": [[1, 2], [3]], "max_tokens": 0, "presence_penalty": 1.5, "frequency_penalty": -1,
         "top_k": 5, "min_p": 0.1, "repetition_penalty": 1.1},
        {"prompt": "x", "max_tokens": -1},
        {"prompt": "\u00e9\u20ac\ud83d\ude00", "stop": "q", "logit_bias": {"5": 1}},
    ]
    chat = [
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
        {"messages": [{"role": "system", "content": "be terse"},
                      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
         "stream": True, "logprobs": True, "top_logprobs": 3, "max_completion_tokens": 5},
        {"messages": [{"role": "assistant", "content": None,
                       "tool_calls": [{"id": "1", "type": "function",
                                       "function": {"name": "f", "arguments": "{}"}}]}]},
        {"messages": [], "n": 3},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
    ]
    for i, b in enumerate(comp):
        put("api", f"completion-{i}", "0" + json.dumps(b))
    for i, b in enumerate(chat):
        put("api", f"chat-{i}", "1" + json.dumps(b))
    put("api", "truncated", '0{"prompt": "abc", "max_tok')
    put("api", "bad-utf8", b'0{"prompt": "\xff\xfe"}')
    put("api", "deep", "1" + "[" * 200 + "]" * 200)


def st_file(tensors, meta=None, pad=0):
    """A safetensors file: header JSON then the data; tensors = [(name, dtype, shape, bytes)]."""
    hdr, off, blob = {}, 0, b""
    if meta:
        hdr["__metadata__"] = meta
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blob += data
    h = json.dumps(hdr).encode() + b" " * pad
    return struct.pack("<Q", len(h)) + h + blob


def safetensors_seeds():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    put("safetensors", "one-f32", st_file([("w", "F32", [2, 2], f32)]))
    put("safetensors", "mixed", st_file([("a.weight", "BF16", [2, 4], bytes(range(16))),
                                         ("a.nm_mask", "U32", [1, 1], b"\xff\xff\x00\x00"),
                                         ("b", "I64", [1], b"\x01" * 8), ("e", "F16", [0], b"")],
                                        meta={"format": "pt", "sparsity": "2:4"}, pad=5))
    put("safetensors", "overlap", st_file([("a", "U8", [4], b"abcd")])[:-2])
    put("safetensors", "empty-header", struct.pack("<Q", 2) + b"{}")


def config_seeds():
    put("model_config", "tiny", (ROOT / "models/tiny/config.json").read_bytes())
    for p in sorted((ROOT / "config/presets").glob("*.json")):
        put("model_config", p.stem, p.read_bytes())
    put("server_conf", "default", (ROOT / "config/sparsed.json").read_bytes())
    put("server_conf", "small", json.dumps({"port": 9000, "max_seqs": 2, "api_keys": ["k"], "request_timeout": 0.5,
                                            "backend": "cuda", "log_level": "debug", "_x": 1}))


def tokenizer_json_seeds():
    """The bundled tokenizer cut down to its byte alphabet and a few merges (a full 0.5 MB
    vocabulary would make every run slow), and variants of its components."""
    t = json.loads((ROOT / "models/tiny/tokenizer.json").read_text())
    keep = 300
    vocab = {k: v for k, v in t["model"]["vocab"].items() if v < keep}
    merges = []
    for m in t["model"]["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    t["model"]["vocab"], t["model"]["merges"] = vocab, merges
    put("tokenizer_json", "tiny-cut", json.dumps(t))
    t2 = dict(t, normalizer={"type": "NFC"}, post_processor=None,
              decoder={"type": "Sequence", "decoders": [{"type": "ByteLevel"}]})
    put("tokenizer_json", "variant", json.dumps(t2))
    t3 = dict(t, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]})
    put("tokenizer_json", "split", json.dumps(t3))


def tokenizer_seeds():
    texts = ["def f(x):\n    return x + 1\n", "Hello, world!", "<|im_start|>user\nhi<|im_end|>\n",
             "\u00e9\u00e8 \u4e2d\u6587 \U0001f600  \t\r\n", "   leading spaces", "x" * 300]
    for i, s in enumerate(texts):
        put("tokenizer", f"text-{i}", s)
    put("tokenizer", "invalid-utf8", b"ab\xff\xc3(\xe2\x82 \xf0\x9f\x98")


def chat_template_seeds():
    tc = json.loads((ROOT / "models/tiny/tokenizer_config.json").read_text())
    put("chat_template", "tiny", tc["chat_template"])
    shared = ROOT.parent / "shared" / "tokenizers"
    for fam in ("llama3", "qwen3"):
        p = shared / fam / "tokenizer_config.json"
        if p.exists():
            ct = json.loads(p.read_text()).get("chat_template")
            if isinstance(ct, str):
                put("chat_template", fam, ct)
    for p in sorted((ROOT / "tests/fixtures/templates").glob("*.jinja")):
        put("chat_template", p.stem, p.read_bytes())
    msgs = json.dumps([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    put("chat_template", "with-messages",
        "{% for m in messages %}{{ m.role|upper }}: {{ m['content']|trim }}{% if not loop.last %}\n"
        "{% endif %}{% endfor %}{{ '!' * 3 }}{{ messages|length }}{% set x = namespace(n=0) %}"
        "{% for i in range(3) %}{% set x.n = x.n + i %}{% endfor %}{{ x.n }}{{ raise_exception('no') if false }}"
        + "\0" + msgs)


def http_seeds():
    """Raw HTTP/1.1 requests for fuzz_http (the client half-closes after sending them)."""
    def post(path, body, extra=""):
        b = json.dumps(body)
        return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
                f"Content-Length: {len(b.encode())}\r\n\r\n{b}")
    put("http", "get-health", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    put("http", "get-models", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n\r\n")
    put("http", "get-metrics-http10", "GET /metrics HTTP/1.0\r\n\r\n")
    put("http", "completion", post("/v1/completions", {"prompt": "def", "max_tokens": 3}))
    put("http", "completion-stream", post("/v1/completions", {"prompt": [1, 2], "max_tokens": 2, "stream": True,
                                                               "stream_options": {"include_usage": True},
                                                               "logprobs": 1}))
    put("http", "chat-stream", post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                              "max_tokens": 2, "stream": True}))
    put("http", "chunked", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\n{\"pro\r\nf\r\nmpt\": \"a\", \"n\"\r\n6\r\n: 2}  \r\n0\r\n\r\n")
    put("http", "pipelined", "GET /ready HTTP/1.1\r\nHost: x\r\n\r\n" + post("/v1/completions", {"prompt": "x",
                                                                                                "max_tokens": 1}))
    put("http", "bad-method", "DELETE /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n")
    put("http", "too-long", post("/v1/completions", {"prompt": "x " * 40, "max_tokens": 1}))


if __name__ == "__main__":
    http_seeds()
    api_seeds()
    safetensors_seeds()
    config_seeds()
    tokenizer_json_seeds()
    tokenizer_seeds()
    chat_template_seeds()
    for d in sorted(CORPUS.iterdir()):
        print(d.name, len(list(d.iterdir())))
