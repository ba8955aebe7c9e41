"""Chat tool calls through the official `openai` client on the bundled model: "required" and a
named function constrain the reply to calls of the offered functions (any model writes them,
even one whose template never shows it the tools); streamed calls equal whole ones; "auto"
needs a template that teaches a markup sparsed parses (the bundled one does not: 400), and with
one (tests/fixtures/templates/hermes_tools.jinja) the tools and earlier calls reach the prompt
exactly as Python jinja2 renders them; in Llama 3.1's markup (tests/fixtures/templates/llama_tools.jinja)
a reply that opens with a call is constrained to one; in both markups "auto" calls stream piece by
piece (tests/fixtures/templates/hermes_calls.jinja primes the tiny model to call)."""
import json
import shutil

import pytest

from conftest import MODEL, ROOT

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "required": ["city"], "additionalProperties": False,
                   "properties": {"city": {"type": "string", "maxLength": 16},
                                  "unit": {"enum": ["celsius", "fahrenheit"]}}}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
TOOLS = [WEATHER, TIME]
MSGS = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_call(call):
    """A call of an offered function with arguments its schema accepts; returns them parsed."""
    assert call.type == "function" and call.id.startswith("call_") and len(call.id) == 29, call
    args = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        assert set(args) <= {"city", "unit"} and isinstance(args["city"], str) and len(args["city"]) <= 16, args
        assert args.get("unit", "celsius") in ("celsius", "fahrenheit"), args
    else:
        assert call.function.name == "get_time" and args == {}, call
    return args


def test_required_calls(client):
    # up to 16 calls of ~15-30 tokens: enough room for all (the tiny model does run to 16)
    r = client.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, tool_choice="required",
                                       max_tokens=600, temperature=1.0, seed=5, n=6)
    for c in r.choices:
        assert c.finish_reason == "tool_calls" and c.message.content is None, c
        assert 1 <= len(c.message.tool_calls) <= 16
        for call in c.message.tool_calls:
            check_call(call)
        ids = [call.id for call in c.message.tool_calls]
        assert len(set(ids)) == len(ids)
    # without parallel calls: exactly one each
    r = client.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, tool_choice="required",
                                       parallel_tool_calls=False, max_tokens=120, temperature=1.0, seed=6, n=6)
    assert all(c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1 for c in r.choices), r


def test_named_function(client):
    choice = {"type": "function", "function": {"name": "get_weather"}}
    r = client.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, tool_choice=choice,
                                       max_tokens=120, temperature=0.8, seed=2, n=4, parallel_tool_calls=False)
    for c in r.choices:
        (call,) = c.message.tool_calls
        assert call.function.name == "get_weather"
        check_call(call)


def test_stream_equals_whole(client):
    """Streamed calls come as OpenAI streams them: each call's id, type and name in its first
    piece, then its arguments piece by piece; joined they equal the whole response's calls."""
    kw = dict(model="tiny", messages=MSGS, tools=TOOLS, tool_choice="required", max_tokens=600,
              temperature=1.0, seed=9, n=2)
    whole = client.chat.completions.create(**kw)
    calls, finish, content, pieces = {}, {}, {}, 0
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            content[c.index] = content.get(c.index, "") + (c.delta.content or "")
            for t in c.delta.tool_calls or []:
                pieces += 1
                got = calls.setdefault(c.index, {})
                if t.index not in got:
                    assert t.id.startswith("call_") and t.type == "function" and t.function.name, t
                    got[t.index] = [t.function.name, ""]
                else:
                    assert t.id is None and t.function.name is None, t
                got[t.index][1] += t.function.arguments
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    for c in whole.choices:
        want = {k: [t.function.name, t.function.arguments] for k, t in enumerate(c.message.tool_calls)}
        assert calls[c.index] == want and finish[c.index] == c.finish_reason and content[c.index] == ""
    assert pieces > sum(len(c.message.tool_calls) for c in whole.choices)  # arguments came in pieces


def test_cut_short_call(client):
    """A call that max_tokens cuts stays a call with the arguments written so far, finish "length"
    (as OpenAI's); cut before its name has ended there is no call, and no content either."""
    r = client.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, tool_choice="required",
                                       max_tokens=3, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "length" and not c.message.tool_calls and not c.message.content
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = client.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, tool_choice=named,
                                       parallel_tool_calls=False, max_tokens=30, temperature=0)
    c = r.choices[0]
    (call,) = c.message.tool_calls
    assert c.finish_reason == "length" and call.function.name == "get_weather"
    assert call.function.arguments.startswith("{") and c.message.content is None
    with pytest.raises(ValueError):
        json.loads(call.function.arguments)


def test_auto_needs_a_tool_template(client):
    import openai
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, max_tokens=4)
    assert e.value.body["param"] == "tool_choice" and "does not show tools" in e.value.body["message"]
    # "none": the tools are not shown and the reply is text
    r = client.chat.completions.create(model="tiny", messages=MSGS, tools=TOOLS, tool_choice="none", max_tokens=4)
    assert r.choices[0].message.tool_calls is None and isinstance(r.choices[0].message.content, str)


def test_parameters_strict_and_not(client):
    """Without "strict": true the assertions the validator lacks (a lookahead in "pattern") are
    left out, as OpenAI leaves such tools unenforced, and the call is still well formed, an
    integer's bounds held; with it they are refused, naming the keyword."""
    import openai
    params = {"type": "object", "required": ["x"], "additionalProperties": False,
              "properties": {"x": {"type": "string", "pattern": "^a(?=b)", "maxLength": 8},
                             "n": {"type": "integer", "minimum": 0}}}
    loose = {"type": "function", "function": {"name": "f", "parameters": params}}
    r = client.chat.completions.create(model="tiny", messages=MSGS, tools=[loose], tool_choice="required",
                                       parallel_tool_calls=False, max_tokens=80, temperature=0.7, seed=3)
    (call,) = r.choices[0].message.tool_calls
    args = json.loads(call.function.arguments)
    assert call.function.name == "f" and isinstance(args["x"], str) and len(args["x"]) <= 8, args
    assert set(args) <= {"x", "n"} and isinstance(args.get("n", 0), int) and args.get("n", 0) >= 0
    strict = {"type": "function", "function": {"name": "f", "parameters": params, "strict": True}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=MSGS, tools=[strict], tool_choice="required",
                                       max_tokens=4)
    assert "'pattern': lookarounds" in e.value.body["message"], e.value.body


@pytest.fixture(scope="module")
def hermes_model(tmp_path_factory):
    """The bundled model with a chat template that shows tools and teaches <tool_call>."""
    return model_with_template(tmp_path_factory, "hermes_tools")


def test_auto_renders_tools_and_calls(start_server, hermes_model):
    """With a template that shows tools, "auto" is accepted; the prompt holds the tools and an earlier
    call (its arguments sent as the JSON string OpenAI returned) as jinja2 renders them."""
    openai = pytest.importorskip("openai")
    jinja2 = pytest.importorskip("jinja2")
    tokenizers = pytest.importorskip("tokenizers")
    d, cfg = hermes_model
    srv = start_server(args=["--model", str(d)])
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    convo = MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}]
    r = client.chat.completions.create(model=client.models.list().data[0].id, messages=convo, tools=TOOLS,
                                       max_tokens=8, temperature=0)
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length", "tool_calls")
    if c.message.tool_calls:  # the tiny model is not trained to call; if it does, the calls are well formed
        for call in c.message.tool_calls:
            check_call(call)
    norm = [{**m, "content": m["content"] or ""} for m in convo]
    norm[1]["tool_calls"] = [{**norm[1]["tool_calls"][0], "function": {"name": "get_weather",
                                                                        "arguments": {"city": "Paris"}}}]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)  # as transformers sets it up
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    text = env.from_string(cfg["chat_template"]).render(
        messages=norm, tools=TOOLS, bos_token=cfg["bos_token"], add_generation_prompt=True)
    assert "<tools>" in text and '"arguments": {"city": "Paris"}' in text
    tok = tokenizers.Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    assert r.usage.prompt_tokens == len(tok.encode(text, add_special_tokens=False).ids)
    # "auto" calls in this markup are constrained once begun: a strict tool must compile
    strict = {"type": "function", "function": {"name": "f", "strict": True, "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "pattern": "^(?=a)"}}}}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=client.models.list().data[0].id, messages=MSGS, tools=[strict],
                                       max_tokens=4)
    assert e.value.body["param"] == "tools" and "'pattern': lookarounds" in e.value.body["message"]


def check_auto_calls(client, max_tokens):
    """With the fixture's priming the tiny model opens (or goes on) with calls: each comes back as
    tool_calls with finish "tool_calls" and no content, one with parallel_tool_calls false, and
    streamed as forced calls stream (name once, arguments in pieces) equal to the whole response."""
    kw = dict(model=client.models.list().data[0].id, messages=MSGS, tools=TOOLS, temperature=0)
    for parallel in (False, True):
        kw["max_tokens"] = max_tokens if parallel else 64  # the tiny model goes on to the 16 calls allowed
        r = client.chat.completions.create(parallel_tool_calls=parallel, **kw)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls" and c.message.content is None, c
        assert 1 <= len(c.message.tool_calls) <= (16 if parallel else 1), c
        for call in c.message.tool_calls:
            check_call(call)
        chunks = list(client.chat.completions.create(stream=True, parallel_tool_calls=parallel, **kw))
        streamed = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
        got = {}
        for t in streamed:  # as forced calls stream: the name once, then the arguments in pieces
            if t.index not in got:
                assert t.id.startswith("call_") and t.function.name, t
                got[t.index] = [t.function.name, ""]
            else:
                assert t.id is None and t.function.name is None, t
            got[t.index][1] += t.function.arguments
        assert got == {k: [t.function.name, t.function.arguments] for k, t in enumerate(c.message.tool_calls)}
        assert len(streamed) > len(got)  # the arguments came in pieces
        assert not any(ch.choices[0].delta.content for ch in chunks if ch.choices)
        assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_auto_llama_calls(start_server, tmp_path_factory):
    """A template in Llama 3.1's markup (the reply is the call, {"name", "parameters"}; the fixture's
    generation prompt primes the tiny model to open with one): "auto" constrains the calls the reply
    opens with."""
    openai = pytest.importorskip("openai")
    d, _ = model_with_template(tmp_path_factory, "llama_tools")
    srv = start_server(args=["--model", str(d)])
    check_auto_calls(openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120), 600)


def test_auto_hermes_calls(start_server, tmp_path_factory):
    """The Hermes markup (tests/fixtures/templates/hermes_calls.jinja primes the tiny model with
    two <tool_call> blocks): "auto" constrains each call the model opens, and after the first
    only whitespace and calls may follow, so they stream as they are written."""
    openai = pytest.importorskip("openai")
    d, _ = model_with_template(tmp_path_factory, "hermes_calls")
    srv = start_server(args=["--model", str(d)])
    check_auto_calls(openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120), 700)


def model_with_template(tmp_path_factory, name):
    """The bundled model with tests/fixtures/templates/<name>.jinja as its chat template."""
    d = tmp_path_factory.mktemp(name)
    for f in MODEL.iterdir():
        if f.name != "tokenizer_config.json":
            (d / f.name).symlink_to(f)
    cfg = json.loads((MODEL / "tokenizer_config.json").read_text())
    cfg["chat_template"] = (ROOT / "tests" / "fixtures" / "templates" / f"{name}.jinja").read_text()
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return d, cfg


def test_reasoning_split(start_server, tmp_path_factory):
    """A template that opens <think> in the prompt: the reply's thinking is reasoning_content, the
    rest content; the parts put together are the raw text /v1/completions gives for the same
    prompt; streamed parts equal whole ones; chat_template_kwargs enable_thinking false closes
    the block in the prompt, so the reply is all content; split_reasoning false keeps it raw;
    thinking_token_budget cuts the thinking, also of constrained replies, whose JSON or calls come
    after it."""
    openai = pytest.importorskip("openai")
    d, _ = model_with_template(tmp_path_factory, "think")
    srv = start_server(args=["--model", str(d)])
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    msgs = [{"role": "user", "content": "def add(a, b):"}]
    kw = dict(model=model, messages=msgs, max_tokens=40, temperature=0)
    r = client.chat.completions.create(**kw)
    m = r.choices[0].message
    reasoning = m.model_extra.get("reasoning_content")
    assert reasoning is not None
    raw = client.completions.create(model=model, prompt="<|im_start|>user\ndef add(a, b):<|im_end|>\n"
                                    "<|im_start|>assistant\n<think>\n", max_tokens=40, temperature=0).choices[0].text
    if "</think>" in raw:
        head, tail = raw.split("</think>", 1)
        assert reasoning == head and m.content == tail.lstrip()
    else:  # the tiny model does not know the tag: all of it is thinking
        assert reasoning == raw and m.content == ""
    parts = {"reasoning_content": "", "content": ""}
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            parts["content"] += c.delta.content or ""
            parts["reasoning_content"] += (c.delta.model_extra or {}).get("reasoning_content") or ""
    assert parts == {"reasoning_content": reasoning, "content": m.content}
    off = client.chat.completions.create(extra_body={"chat_template_kwargs": {"enable_thinking": False}}, **kw)
    assert "reasoning_content" not in off.choices[0].message.model_extra
    assert off.usage.prompt_tokens > r.usage.prompt_tokens  # "\n</think>\n\n" more in the prompt
    # thinking_token_budget caps the block (the tiny model never closes it by itself): the reply's
    # first 4 tokens are its reasoning, "</think>" follows them, then the answer
    budget = {"thinking_token_budget": 4}
    free = client.chat.completions.create(extra_body=budget, logprobs=True, **kw).choices[0]
    toks = [t.token for t in free.logprobs.content]
    think4 = "".join(toks[:4])
    assert free.message.model_extra.get("reasoning_content") == think4 and free.message.content, free.message
    assert "".join(toks[4:]).startswith("</think>"), toks
    # constrained replies think first too, the constraint from "</think>" on (the same 4 tokens: the
    # block is masked alike, free of special tokens)
    js = client.chat.completions.create(response_format={"type": "json_object"}, extra_body=budget,
                                        **{**kw, "max_tokens": 60}).choices[0]
    assert js.message.model_extra.get("reasoning_content") == think4, js.message
    assert js.message.content.startswith("{"), js.message
    tc = client.chat.completions.create(tools=TOOLS, tool_choice="required", extra_body=budget,
                                        **{**kw, "max_tokens": 120})
    m = tc.choices[0].message
    assert m.tool_calls and m.model_extra.get("reasoning_content") == think4, m
    assert m.tool_calls[0].function.name in ("get_weather", "get_time") and tc.choices[0].finish_reason == "tool_calls"
    streamed = {"reasoning": "", "calls": ""}
    for chunk in client.chat.completions.create(tools=TOOLS, tool_choice="required", extra_body=budget, stream=True,
                                                **{**kw, "max_tokens": 120}):
        for c in chunk.choices:
            streamed["reasoning"] += (c.delta.model_extra or {}).get("reasoning_content") or ""
            for call in c.delta.tool_calls or []:
                streamed["calls"] += call.function.arguments or ""
    assert streamed == {"reasoning": think4, "calls": m.tool_calls[0].function.arguments}
    # zero: no thinking at all; a negative budget is refused
    none = client.chat.completions.create(response_format={"type": "json_object"},
                                          extra_body={"thinking_token_budget": 0}, **{**kw, "max_tokens": 60})
    assert none.choices[0].message.model_extra.get("reasoning_content") == "", none.choices[0].message
    with pytest.raises(openai.BadRequestError, match="thinking_token_budget"):
        client.chat.completions.create(extra_body={"thinking_token_budget": -1}, **kw)
    raw_srv = start_server(args=["--model", str(d), "--split-reasoning", "false"])
    rc = openai.OpenAI(base_url=raw_srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    assert rc.chat.completions.create(**kw).choices[0].message.content == raw
