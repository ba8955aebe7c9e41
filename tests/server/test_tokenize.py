"""POST /tokenize and /detokenize (vLLM's shapes) on the bundled model: ids equal the Hugging
Face tokenizer's, a chat body counts what /v1/chat/completions counts, decoding round-trips,
and bad bodies get 400s naming the field."""
import json

import pytest

from conftest import MODEL


@pytest.fixture(scope="module")
def hf_tok():
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(MODEL / "tokenizer.json"))


def post(server, path, body):
    st, _, raw = server.post(path, body)
    return st, json.loads(raw)


def test_tokenize_prompt(server, hf_tok):
    text = "def main():\n    print('héllo')\n"
    st, r = post(server, "/tokenize", {"prompt": text})
    assert st == 200 and r["tokens"] == hf_tok.encode(text).ids and r["count"] == len(r["tokens"])
    models = json.loads(server.get("/v1/models")[2])
    assert r["max_model_len"] == models["data"][0]["max_model_len"]
    st, bare = post(server, "/tokenize", {"prompt": text, "add_special_tokens": False, "return_token_strs": True})
    assert st == 200 and bare["tokens"] == hf_tok.encode(text, add_special_tokens=False).ids
    assert len(bare["token_strs"]) == bare["count"] and "".join(bare["token_strs"]).startswith("def")
    st, back = post(server, "/detokenize", {"tokens": bare["tokens"]})
    assert st == 200 and back["prompt"] == text


def test_tokenize_chat_counts_what_chat_counts(server):
    msgs = [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "Add two numbers."}]
    st, r = post(server, "/tokenize", {"messages": msgs})
    assert st == 200
    st, _, raw = server.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 1})
    assert st == 200 and json.loads(raw)["usage"]["prompt_tokens"] == r["count"]


@pytest.mark.parametrize("path,body,param", [
    ("/tokenize", {"prompt": ["a", "b"]}, "prompt"),
    ("/tokenize", {"prompt": "a", "add_special_tokens": "yes"}, "add_special_tokens"),
    ("/tokenize", {"messages": "hi"}, "messages"),
    ("/tokenize", {}, "prompt"),
    ("/detokenize", {"tokens": [1, -2]}, "tokens"),
    ("/detokenize", {"tokens": [10 ** 9]}, "tokens"),
    ("/detokenize", {"tokens": "12"}, "tokens"),
])
def test_bad_bodies(server, path, body, param):
    st, r = post(server, path, body)
    assert st == 400 and r["error"]["param"] == param, r


def test_methods_and_json(server):
    assert server.get("/tokenize")[0] == 405
    st, _, raw = server.post("/detokenize", b"[1, 2]")
    assert st == 400 and json.loads(raw)["error"]["code"] == "invalid_json"
