"""Chat templates rendered by our Jinja interpreter (through `sparsed render-template`) against
Python jinja2 set up exactly as transformers' apply_chat_template sets it up: byte equality for
the Llama-3, Qwen3 and bundled ChatML templates and the fixture templates, over many
conversations; templates that raise must fail in both."""

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
FIXTURES = ROOT / "tests" / "fixtures" / "templates"
SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def sparsed_bin():
    """The binary under test: $SPARSED_BIN, else $SD_BUILD/sparsed (default build/)."""
    p = os.environ.get("SPARSED_BIN") or str(ROOT / os.environ.get("SD_BUILD", "build") / "sparsed")
    if not os.access(p, os.X_OK):
        pytest.skip(f"{p} not built")
    return p


def compile_reference(source):
    """transformers' own compiled template (its ImmutableSandboxedEnvironment with trim_blocks,
    lstrip_blocks, loopcontrols, the generation tag, raise_exception, strftime_now, tojson)."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template(source)


def normalize(messages):
    """What sd_chat_messages_normalize does: text parts joined, null content as "", tool-call
    arguments given as a string holding a JSON object turned into that object."""
    out = copy.deepcopy(messages)
    for m in out:
        c = m.get("content")
        if c is None and "content" in m:
            m["content"] = ""
        elif isinstance(c, list):
            m["content"] = "".join(p["text"] for p in c)
        for call in m.get("tool_calls") or []:
            f = call.get("function", {})
            if isinstance(f.get("arguments"), str):
                try:
                    args = json.loads(f["arguments"])
                except ValueError:
                    continue
                if isinstance(args, dict):
                    f["arguments"] = args
    return out


def reference(source, specials, messages, extra):
    """Renders as apply_chat_template does; returns (text, None) or (None, error message)."""
    import jinja2

    kwargs = {**specials, **extra}
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    agp = kwargs.pop("add_generation_prompt", False)
    try:
        text = compile_reference(source).render(
            messages=normalize(messages), tools=tools, documents=documents, add_generation_prompt=agp, **kwargs
        )
        return text, None
    except (jinja2.TemplateError, TypeError, ValueError, AttributeError, ZeroDivisionError, SyntaxError) as e:
        return None, str(e)


def ours(args, messages, extra):
    payload = dict(extra)
    payload["messages"] = messages
    r = subprocess.run(
        [sparsed_bin(), "render-template", *args],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
    )
    if r.returncode != 0:
        return None, r.stderr.decode(errors="replace")
    return r.stdout.decode(), None


def load_config(path):
    cfg = json.loads(Path(path).read_text())
    specials = {}
    for k in SPECIAL:
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            specials[k] = v
    return cfg["chat_template"], specials


def ours_batch(args, cases):
    """Renders many (messages, extra) cases in one `--jsonl` run; returns [(text, error)]."""
    lines = [json.dumps(dict(extra, messages=messages)) for messages, extra in cases]
    r = subprocess.run(
        [sparsed_bin(), "render-template", "--jsonl", *args],
        input=("\n".join(lines) + "\n").encode(),
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    # split on "\n" only: rendered text may hold U+2028, which splitlines() would cut at
    out = [json.loads(line) for line in r.stdout.decode().split("\n") if line]
    assert len(out) == len(cases)
    return [(o.get("text"), o.get("error")) for o in out]


def check_all(source, specials, args, cases, label):
    """Byte equality with jinja2 for every case; returns each case's outcome ("ok"/"error")."""
    outcomes = []
    for (messages, extra, name), (got, got_err) in zip(cases, ours_batch(args, [c[:2] for c in cases])):
        want, want_err = reference(source, specials, messages, extra)
        where = f"{label} / {name} / {extra}"
        if want_err is not None:
            assert got_err is not None, f"{where}: jinja2 raised {want_err!r} but we rendered {got!r}"
            outcomes.append("error")
            continue
        assert got_err is None, f"{where}: we failed ({got_err}) where jinja2 rendered {want!r}"
        assert got == want, f"{where}: output differs"
        outcomes.append("ok")
    return outcomes


# ---- conversations ----

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. ",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": []},
    },
}

U1 = {"role": "user", "content": "Hello! What's the weather like in Paris?"}
A1 = {"role": "assistant", "content": "It is sunny and 21°C in Paris."}
U2 = {"role": "user", "content": "And tomorrow?"}
SYS = {"role": "system", "content": "You are a helpful assistant.\nAnswer briefly."}

BASIC = {
    "single_user": [U1],
    "system_user": [SYS, U1],
    "multi_turn": [SYS, U1, A1, U2],
    "assistant_last": [U1, A1],
    "no_system_multi": [U1, A1, U2, {"role": "assistant", "content": "Rain, probably."}, U2],
    "text_parts": [SYS, {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]}],
    "unicode": [
        {"role": "user", "content": "Grüße, 世界! 🙂 \"quotes\" 'single' back\\slash\ttab\r\nCRLF \u2028 end"},
        {"role": "assistant", "content": "Ça va très bien — merci. ½ ∑ 𝔘"},
        {"role": "user", "content": "   padded with spaces and newlines\n\n  "},
    ],
    "empty_content": [{"role": "user", "content": ""}],
    "empty_messages": [],
    "system_only": [SYS],
    "bad_order": [U1, U2],
    "bad_role": [{"role": "narrator", "content": "Once upon a time"}],
}

QWEN_EXTRA = {
    "reasoning_field": [
        U1,
        {"role": "assistant", "content": "Sunny.", "reasoning_content": "\nThe user asks about weather.\n"},
        U2,
    ],
    "reasoning_last": [U1, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Let me think."}],
    "think_inline": [
        U1,
        {"role": "assistant", "content": "<think>\nSome thoughts\n</think>\n\nSunny today."},
    ],
    "think_inline_old_turn": [
        U1,
        {"role": "assistant", "content": "<think>\nold thoughts\n</think>\n\nSunny."},
        U2,
    ],
    "tool_calls": [
        SYS,
        U1,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}},
                {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}},
            ],
        },
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "14:00"},
        {"role": "assistant", "content": "It is 21°C at 14:00."},
        U2,
    ],
    "tool_calls_with_text": [
        U1,
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "<tool_response>sunny</tool_response>"},
    ],
    "tool_response_user": [
        {"role": "user", "content": "<tool_response>x</tool_response>"},
        {"role": "assistant", "content": "ok"},
    ],
}

EXTRAS = [
    {"add_generation_prompt": True},
    {"add_generation_prompt": False},
]


def templates():
    out = [("tiny_chatml", ROOT / "models" / "tiny" / "tokenizer_config.json")]
    for fam in ("llama3", "qwen3"):
        out.append((fam, SHARED / "tokenizers" / fam / "tokenizer_config.json"))
    return out


@pytest.mark.parametrize("name,path", templates(), ids=[t[0] for t in templates()])
def test_model_templates(name, path):
    if not path.exists():
        pytest.skip(f"{path} absent (../shared is needed for the {name} template)")
    source, specials = load_config(path)
    convs = dict(BASIC)
    extras = list(EXTRAS)
    if name == "qwen3":
        convs.update(QWEN_EXTRA)
        extras += [
            {"add_generation_prompt": True, "tools": [WEATHER_TOOL, TIME_TOOL]},
            {"add_generation_prompt": True, "enable_thinking": False},
            {"add_generation_prompt": False, "tools": [WEATHER_TOOL], "enable_thinking": True},
        ]
    cases = [(msgs, extra, cname) for cname, msgs in convs.items() for extra in extras]
    results = check_all(source, specials, ["--tokenizer-config", str(path)], cases, name)
    assert results.count("ok") >= len(results) // 2, results


FIXTURE_SPECIALS = {"bos_token": "<s>", "eos_token": "</s>"}


@pytest.mark.parametrize("fixture", ["mistral", "llama2", "features"])
def test_fixture_templates(fixture):
    path = FIXTURES / f"{fixture}.jinja"
    source = path.read_text()
    convs = dict(BASIC)
    convs.update(QWEN_EXTRA)
    extras = [dict(FIXTURE_SPECIALS, **e) for e in EXTRAS]
    if fixture == "features":
        extras.append(dict(FIXTURE_SPECIALS, add_generation_prompt=True, tools=[WEATHER_TOOL, TIME_TOOL]))
    cases = [(msgs, extra, cname) for cname, msgs in convs.items() for extra in extras]
    results = check_all(source, {}, ["--template", str(path)], cases, fixture)
    outcomes = {c[2]: r for c, r in zip(cases, results)}
    if fixture in ("mistral", "llama2"):
        # raise_exception paths are exercised, and the normal ones render
        assert outcomes["bad_order"] == "error" and outcomes["multi_turn"] == "ok"


def test_raise_exception_message_reaches_caller():
    path = FIXTURES / "mistral.jinja"
    _, want_err = reference(path.read_text(), {}, BASIC["bad_order"], FIXTURE_SPECIALS)
    _, got_err = ours(["--template", str(path)], BASIC["bad_order"], FIXTURE_SPECIALS)
    assert want_err and got_err and want_err in got_err


def test_syntax_error_names_line():
    bad = FIXTURES / "broken.jinja.txt"
    r = subprocess.run(
        [sparsed_bin(), "render-template", "--template", str(bad)], input=b'{"messages": []}', capture_output=True
    )
    import jinja2

    with pytest.raises(jinja2.TemplateSyntaxError) as ei:
        compile_reference(bad.read_text())
    assert r.returncode != 0
    assert f"line {ei.value.lineno}" in r.stderr.decode()


def test_non_text_part_is_rejected():
    msgs = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    got, err = ours(["--template", str(FIXTURES / "llama2.jinja")], msgs, {})
    assert got is None and "image_url" in err


def test_unit_cases_fixture_matches_jinja2():
    """cases.json (the expectations of tests/engine/test_jinja.c) is what jinja2 renders today."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_cases", FIXTURES / "gen_cases.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    stored = json.loads((FIXTURES / "cases.json").read_text(encoding="utf-8"))
    assert stored == gen.build(), "run tests/fixtures/templates/gen_cases.py to refresh cases.json"
