"""The OpenAI API through the official `openai` client: completions and chat, streaming and
not, n > 1, stop, seeds, usage, logprobs, logit_bias, JSON mode and schemas — checked against `sparsed generate`, the HF
tokenizer and transformers' logits on the bundled model."""
import json
import math
import re
import subprocess

import pytest

from conftest import MODEL, ROOT, sparsed_bin

PROMPTS = ["def main(", "import numpy as np\n", "class Foo:\n    def __init__(self"]


@pytest.fixture(scope="module")
def hf_tok():
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(MODEL / "tokenizer.json"))


def generate_cli(prompt, max_tokens):
    r = subprocess.run([sparsed_bin(), "generate", "--model", str(MODEL), "--prompt", prompt, "--max-tokens",
                        str(max_tokens), "--temperature", "0", "--threads", "2"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("\n")  # generate ends its output with one newline
    return r.stdout[:-1]


def test_models(client):
    ids = [m.id for m in client.models.list().data]
    assert ids == ["tiny"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_completion_equals_generate(client, hf_tok, prompt):
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=20, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-") and r.model == "tiny"
    assert len(r.choices) == 1 and r.choices[0].index == 0
    assert r.choices[0].text == generate_cli(prompt, 20)
    assert r.usage.prompt_tokens == len(hf_tok.encode(prompt).ids)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.choices[0].finish_reason == ("length" if r.usage.completion_tokens == 20 else "stop")


def test_stream_equals_non_stream(client):
    for prompt in PROMPTS:
        full = client.completions.create(model="tiny", prompt=prompt, max_tokens=16, temperature=0)
        chunks = list(client.completions.create(model="tiny", prompt=prompt, max_tokens=16, temperature=0,
                                                stream=True))
        assert chunks and all(c.id == chunks[0].id for c in chunks)
        assert chunks[0].choices[0].text != ""  # the first chunk carries a real token
        assert "".join(c.choices[0].text for c in chunks) == full.choices[0].text
        assert [c.choices[0].finish_reason for c in chunks][-1] == full.choices[0].finish_reason
        assert all(c.choices[0].finish_reason is None for c in chunks[:-1])


def test_stream_usage_chunk(client, hf_tok):
    chunks = list(client.completions.create(model="tiny", prompt="x = 1\n", max_tokens=7, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    u = chunks[-1].usage
    assert u.prompt_tokens == len(hf_tok.encode("x = 1\n").ids)
    full = client.completions.create(model="tiny", prompt="x = 1\n", max_tokens=7, temperature=0)
    assert u.completion_tokens == full.usage.completion_tokens
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_n_choices_and_seed(client):
    kw = dict(model="tiny", prompt="def f(x):\n", max_tokens=12, temperature=1.0, seed=1234, n=3)
    a = client.completions.create(**kw)
    b = client.completions.create(**kw)
    assert sorted(c.index for c in a.choices) == [0, 1, 2]
    assert [c.text for c in a.choices] == [c.text for c in b.choices]  # same seed, same text
    c = client.completions.create(**{**kw, "seed": 99})
    assert [x.text for x in c.choices] != [x.text for x in a.choices]
    assert 3 <= a.usage.completion_tokens <= 36


def test_batch_prompts(client):
    r = client.completions.create(model="tiny", prompt=PROMPTS[:2], max_tokens=6, temperature=0, n=2)
    assert len(r.choices) == 4
    for c in r.choices:
        single = client.completions.create(model="tiny", prompt=PROMPTS[c.index // 2], max_tokens=6,
                                           temperature=0)
        assert c.text == single.choices[0].text


def test_token_id_prompt(client, hf_tok):
    ids = hf_tok.encode("def main(").ids
    a = client.completions.create(model="tiny", prompt=ids, max_tokens=8, temperature=0)
    b = client.completions.create(model="tiny", prompt="def main(", max_tokens=8, temperature=0)
    assert a.choices[0].text == b.choices[0].text
    assert a.usage.prompt_tokens == len(ids)


def test_stop_string(client):
    base = client.completions.create(model="tiny", prompt="def hello(", max_tokens=20, temperature=0)
    text = base.choices[0].text
    stop = text[4:6]
    assert stop and stop in text
    r = client.completions.create(model="tiny", prompt="def hello(", max_tokens=20, temperature=0, stop=[stop])
    assert r.choices[0].text == text[:text.index(stop)]
    assert r.choices[0].finish_reason == "stop"
    chunks = list(client.completions.create(model="tiny", prompt="def hello(", max_tokens=20, temperature=0,
                                            stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text


def hf_prompt_logprobs(ids):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(MODEL), torch_dtype=torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


def test_echo_prompt_logprobs_match_transformers(client, hf_tok):
    prompt = "import os\nimport sys\n"
    ids = hf_tok.encode(prompt).ids
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=0, echo=True, logprobs=3)
    c = r.choices[0]
    assert c.text == prompt
    lp = c.logprobs
    assert len(lp.tokens) == len(ids) and len(lp.token_logprobs) == len(ids)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    ref = hf_prompt_logprobs(ids)
    for i in range(1, len(ids)):
        want = ref[i - 1, ids[i]].item()
        assert abs(lp.token_logprobs[i] - want) < 2e-2, (i, lp.token_logprobs[i], want)
        top = sorted(lp.top_logprobs[i].values(), reverse=True)
        want_top = ref[i - 1].topk(3).values.tolist()
        assert len(top) <= 3 and abs(top[0] - want_top[0]) < 2e-2


def test_generated_logprobs(client):
    r = client.completions.create(model="tiny", prompt="def main(", max_tokens=6, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == r.usage.completion_tokens == len(lp.token_logprobs)
    assert "".join(lp.tokens) == r.choices[0].text
    for tok, l, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert l <= 0 and len(top) <= 2
        assert math.isclose(l, max(top.values()), abs_tol=1e-5)  # greedy picks the top token
    chunks = list(client.completions.create(model="tiny", prompt="def main(", max_tokens=6, temperature=0,
                                            logprobs=2, stream=True))
    streamed = [l for c in chunks if c.choices[0].logprobs for l in c.choices[0].logprobs.token_logprobs]
    assert streamed == pytest.approx(lp.token_logprobs, abs=1e-6)


def test_logit_bias(client, hf_tok):
    """+100 makes a token the greedy pick at every step; -100 on the unbiased greedy tokens steers
    the text away from them; both through the official client, which sends the ids as keys."""
    forced = hf_tok.encode("xyz", add_special_tokens=False).ids[0]
    r = client.completions.create(model="tiny", prompt="def main(", max_tokens=5, temperature=0,
                                  logit_bias={str(forced): 100})
    assert r.choices[0].text == hf_tok.decode([forced] * 5)
    plain = client.completions.create(model="tiny", prompt="def main(", max_tokens=1, temperature=0,
                                      logprobs=0)
    first = hf_tok.encode(plain.choices[0].text, add_special_tokens=False).ids
    assert len(first) == 1
    banned = client.completions.create(model="tiny", prompt="def main(", max_tokens=1, temperature=0,
                                       logit_bias={str(first[0]): -100})
    assert banned.choices[0].text != plain.choices[0].text
    # sampled: a banned token never comes, whatever the seed
    many = client.completions.create(model="tiny", prompt="def main(", max_tokens=1, temperature=1.0, n=16,
                                     seed=3, logit_bias={str(first[0]): -100})
    assert all(c.text != plain.choices[0].text for c in many.choices)


def test_json_object_mode(client):
    """response_format json_object: a greedy request primed with a short object closes one and stops;
    sampled choices are each the start of an object (one that stopped parses); streamed text is the
    same as whole text."""
    fmt = {"response_format": {"type": "json_object"}}
    r = client.completions.create(model="tiny", prompt='headers = {"Content-Type": "application/json"}\nparams = ',
                                  max_tokens=80, temperature=0, extra_body=fmt)
    c = r.choices[0]
    assert c.finish_reason == "stop" and isinstance(json.loads(c.text), dict), c.text
    kw = dict(model="tiny", prompt="config = ", max_tokens=60, temperature=0.7, seed=11, n=4, extra_body=fmt)
    r = client.completions.create(**kw)
    for c in r.choices:
        assert c.text.lstrip()[:1] == "{", c.text
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.text), dict), c.text
    chunks = list(client.completions.create(stream=True, **kw))
    text = {}
    for ch in chunks:
        for c in ch.choices:
            text[c.index] = text.get(c.index, "") + c.text
    assert [text[i] for i in range(4)] == [c.text for c in r.choices]


PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}}}


def test_json_schema_mode(client):
    """response_format json_schema: every choice that stopped is exactly the schema's object (the
    tiny model may run an integer's digits on to max_tokens, so not all stop); the text is always
    the start of one."""
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON,
                                                                       "strict": True}}}
    r = client.completions.create(model="tiny", prompt='person = {"name": "Ada", "age": 36}\nother = ',
                                  max_tokens=60, temperature=1.0, seed=41, n=8, extra_body=fmt)
    stopped = [c for c in r.choices if c.finish_reason == "stop"]
    assert stopped, [c.text for c in r.choices]
    for c in stopped:
        v = json.loads(c.text)
        assert set(v) == {"name", "age"} and isinstance(v["name"], str) and len(v["name"]) <= 12, c.text
        assert isinstance(v["age"], int) and not isinstance(v["age"], bool), c.text
    for c in r.choices:
        assert c.text.lstrip()[:1] in ("", "{"), c.text


def schema_choices(client, schema, prompt, seed):
    """8 sampled completions held to schema (strict), and those that stopped (at least one)."""
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema, "strict": True}}}
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=60, temperature=1.0, seed=seed, n=8,
                                  extra_body=fmt)
    stopped = [c for c in r.choices if c.finish_reason == "stop"]
    assert stopped, [c.text for c in r.choices]
    return r.choices, stopped


def test_json_schema_numeric_bounds(client):
    """An integer and a number with bounds take only digits that can still end within them: every
    choice's age and score are in range, and no age runs its digits on to max_tokens (the
    unbounded schema above lets the tiny model do that)."""
    schema = {**PERSON, "required": ["name", "age", "score"],
              "properties": {**PERSON["properties"], "age": {"type": "integer", "minimum": 18, "exclusiveMaximum": 66},
                             "score": {"type": "number", "minimum": 0, "maximum": 1}}}
    choices, stopped = schema_choices(client, schema, 'person = {"name": "Ada", "age": 36}\nother = ', 41)
    for c in stopped:
        v = json.loads(c.text)
        assert 18 <= v["age"] <= 65 and isinstance(v["age"], int) and 0 <= v["score"] <= 1, c.text
    for c in choices:  # cut by max_tokens only inside the name, never in the age's digits
        m = re.search(r'"age": *(-?[0-9]+)', c.text)
        assert not m or len(m.group(1)) <= 2, c.text


def test_json_schema_pattern_and_format(client):
    """A string's "pattern" and "format" hold every character the model writes: each choice that
    stopped matches them (Python's re on the code, a date that datetime parses), and no choice
    holds a character outside them."""
    import datetime
    schema = {"type": "object", "additionalProperties": False, "required": ["code", "day"],
              "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
                             "day": {"type": "string", "format": "date"}}}
    _, stopped = schema_choices(client, schema, 'item = {"code": "AB-123", "day": "2024-01-31"}\nother = ', 5)
    for c in stopped:
        v = json.loads(c.text)
        assert re.fullmatch(r"[A-Z]{2}-[0-9]{3}", v["code"]), c.text
        datetime.date.fromisoformat(v["day"][:8] + "01")  # the pattern allows day 31 of any month
        assert re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", v["day"]), c.text


def chat_or_skip(client, **kw):
    import openai
    try:
        return client.chat.completions.create(model="tiny", **kw)
    except openai.BadRequestError as e:
        if "chat template" in str(e):
            pytest.skip(f"chat templates not available in this build: {e}")
        raise


MESSAGES = [{"role": "system", "content": "You write Python."},
            {"role": "user", "content": [{"type": "text", "text": "Write a function"},
                                         {"type": "text", "text": " that adds."}]}]


def rendered_chat_ids(hf_tok, messages):
    jinja2 = pytest.importorskip("jinja2")
    cfg = json.loads((MODEL / "tokenizer_config.json").read_text())
    norm = [{**m, "content": m["content"] if isinstance(m["content"], str)
             else "".join(p["text"] for p in m["content"])} for m in messages]
    text = jinja2.Environment().from_string(cfg["chat_template"]).render(
        messages=norm, bos_token=cfg["bos_token"], eos_token=cfg["eos_token"], add_generation_prompt=True)
    return hf_tok.encode(text, add_special_tokens=False).ids


def test_chat_completion(client, hf_tok):
    r = chat_or_skip(client, messages=MESSAGES, max_completion_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    msg = r.choices[0].message
    assert msg.role == "assistant" and isinstance(msg.content, str)
    ids = rendered_chat_ids(hf_tok, MESSAGES)
    assert r.usage.prompt_tokens == len(ids)
    # the same tokens through /v1/completions give the same greedy text
    c = client.completions.create(model="tiny", prompt=ids, max_tokens=12, temperature=0)
    assert msg.content == c.choices[0].text


def test_chat_stream(client):
    full = chat_or_skip(client, messages=MESSAGES, max_tokens=10, temperature=0)
    chunks = list(client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=10, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].object == "chat.completion.chunk"
    assert chunks[0].choices[0].delta.role == "assistant" and not chunks[0].choices[0].delta.content
    body = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in body) == full.choices[0].message.content
    assert body[-1].choices[0].finish_reason == full.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens


def test_chat_logprobs(client):
    r = chat_or_skip(client, messages=MESSAGES, max_tokens=5, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert len(t.top_logprobs) == 3
        assert math.isclose(t.logprob, t.top_logprobs[0].logprob, abs_tol=1e-5)
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token or "\ufffd" in t.token
