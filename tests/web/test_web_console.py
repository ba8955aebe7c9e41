"""The web console in a headless Chromium (Selenium): a streamed chat reply equal to the API's
own answer, stop freeing the server's sequence, the server page's live numbers, the 401
message and the API key, and a prune job run from the Jobs page. Skips without chromium."""
import json
import re
import os
import threading
import time

import pytest

from web_helpers import browser, metric, screenshot, srv



def wait(cond, timeout=60, what="condition", interval=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = srv.Server(tmp_path_factory.mktemp("web"))
    try:
        yield s.wait_ready()
    finally:
        s.stop()


@pytest.fixture
def page(server):
    d = browser()
    try:
        d.get(server.url + "/")
        wait(lambda: d.find_element("id", "chat-model").get_attribute("textContent") not in ("…", ""), 20, "the model name")
        yield d
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors  # no CSP violation, no script error
    finally:
        d.quit()


def set_field(d, id_, value):
    el = d.find_element("id", id_)
    if el.get_attribute("type") == "checkbox":
        if el.is_selected() != bool(value):
            el.click()
        return
    el.clear()
    el.send_keys(str(value))


# Records every length the last reply's text takes, as the DOM changes.
OBSERVE = """
window.__lens = [];
new MutationObserver(() => {
  const t = [...document.querySelectorAll('.msg .text')].pop();
  if (t) window.__lens.push(t.textContent.length);
}).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
"""


def send(d, text):
    box = d.find_element("id", "prompt")
    box.send_keys(text)
    d.find_element("id", "send").click()


def last_reply(d):
    return d.find_elements("css selector", ".msg.assistant, .msg.completion")[-1]


def test_chat_streams_the_models_reply(server, page):
    d = page
    set_field(d, "p-temperature", 0)
    set_field(d, "p-max-tokens", 48)
    set_field(d, "p-system", "You are terse.")
    d.execute_script(OBSERVE)
    send(d, "Tell me a story about a cat.")
    wait(lambda: "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "the reply's stats")
    reply = last_reply(d)
    text = reply.find_element("css selector", ".text").get_attribute("textContent")
    # The reference: the same conversation through the API, without streaming.
    status, _, body = server.post("/v1/chat/completions", {
        "messages": [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": "Tell me a story about a cat."}],
        "temperature": 0, "max_tokens": 48})
    assert status == 200
    ref = json.loads(body)
    assert text == ref["choices"][0]["message"]["content"]
    stats = reply.find_element("css selector", ".stats").text
    assert f"{ref['usage']['completion_tokens']} tokens" in stats and "TTFT" in stats
    lens = d.execute_script("return window.__lens")
    assert len({n for n in lens if 0 < n < len(text)}) >= 1, lens  # text grew in steps
    assert d.find_element("id", "chat-error").is_displayed() is False
    # The second turn carries the first: its reply is what the API gives for the 3-message history.
    send(d, "And then?")
    wait(lambda: len(d.find_elements("css selector", ".msg.assistant .stats")) == 2 and
         "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "the second reply")
    status, _, body = server.post("/v1/chat/completions", {
        "messages": [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": "Tell me a story about a cat."},
                     {"role": "assistant", "content": text},
                     {"role": "user", "content": "And then?"}],
        "temperature": 0, "max_tokens": 48})
    assert last_reply(d).find_element("css selector", ".text").get_attribute("textContent") == \
        json.loads(body)["choices"][0]["message"]["content"]
    screenshot(d, "chat")


def test_thinking_model_shows_reasoning_apart(start_server, tmp_path):
    """A model whose template opens <think> (tests/fixtures/templates/think.jinja): the reply's
    reasoning_content streams into the folding Thinking block, the content into the text, both
    equal to the API's whole answer to the same request, its thinking budget of 4 tokens too (the
    tiny model never closes the block by itself: without the budget there is no content)."""
    cfg = json.loads((srv.MODEL / "tokenizer_config.json").read_text())
    cfg["chat_template"] = (srv.ROOT / "tests" / "fixtures" / "templates" / "think.jinja").read_text()
    model = tmp_path / "think"
    model.mkdir()
    for f in srv.MODEL.iterdir():
        if f.name != "tokenizer_config.json":
            (model / f.name).symlink_to(f)
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    s = start_server(args=["--model", str(model)])
    d = browser()
    try:
        d.get(s.url + "/")
        wait(lambda: d.find_element("id", "chat-model").get_attribute("textContent") not in ("…", ""), 20, "model")
        set_field(d, "p-temperature", 0)
        set_field(d, "p-max-tokens", 24)
        set_field(d, "p-think-budget", 4)
        send(d, "def add(a, b):")
        wait(lambda: "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "the reply")
        status, _, body = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "def add(a, b):"}],
                                                          "temperature": 0, "max_tokens": 24,
                                                          "thinking_token_budget": 4})
        msg = json.loads(body)["choices"][0]["message"]
        assert msg["content"], msg
        reply = last_reply(d)
        think = reply.find_element("css selector", ".think-text").get_attribute("textContent")
        assert think == msg["reasoning_content"] and think
        assert reply.find_element("css selector", ".text").get_attribute("textContent") == msg["content"]
        assert not [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        d.quit()


def test_raw_completion_mode(server, page):
    d = page
    from selenium.webdriver.support.ui import Select
    Select(d.find_element("id", "p-mode")).select_by_value("completion")
    assert not d.find_element("id", "p-system").is_displayed()
    set_field(d, "p-temperature", 0)
    set_field(d, "p-max-tokens", 24)
    send(d, "Once upon a time")
    wait(lambda: "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "the completion")
    status, _, body = server.post("/v1/completions", {"prompt": "Once upon a time", "temperature": 0,
                                                      "max_tokens": 24})
    assert last_reply(d).find_element("css selector", ".text").get_attribute("textContent") == \
        json.loads(body)["choices"][0]["text"]


def test_json_output_modes(server, page):
    """Output: JSON object sends response_format and shows what the API answers to the same request
    (one JSON object); JSON schema with a schema that does not parse says so and sends nothing."""
    d = page
    from selenium.webdriver.support.ui import Select
    Select(d.find_element("id", "p-mode")).select_by_value("completion")
    assert not d.find_element("id", "p-schema").is_displayed()
    Select(d.find_element("id", "p-format")).select_by_value("json_object")
    set_field(d, "p-temperature", 0)
    set_field(d, "p-max-tokens", 80)
    prompt = 'headers = {"Content-Type": "application/json"}; params = '  # one line: Enter would send
    send(d, prompt)
    wait(lambda: "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "the completion")
    status, _, body = server.post("/v1/completions", {"prompt": prompt, "temperature": 0, "max_tokens": 80,
                                                      "response_format": {"type": "json_object"}})
    want = json.loads(body)["choices"][0]
    got = last_reply(d).find_element("css selector", ".text").get_attribute("textContent")
    assert got == want["text"] and want["finish_reason"] == "stop" and isinstance(json.loads(got), dict)
    Select(d.find_element("id", "p-format")).select_by_value("json_schema")
    assert d.find_element("id", "p-schema").is_displayed()
    set_field(d, "p-schema", "{not json")
    n = len(d.find_elements("css selector", ".msg"))
    send(d, "x = ")
    wait(lambda: "Schema" in d.find_element("id", "chat-error").text, 10, "the schema error")
    assert len(d.find_elements("css selector", ".msg")) == n
    assert d.find_element("id", "prompt").get_attribute("value") == "x = "


def test_tool_calls_show_as_they_stream(server, page):
    """Output: Tool calls sends the tools list and tool_choice (chat mode) and shows each call's name
    and arguments, equal to what the API answers to the same request; a list that does not parse,
    or raw completion mode, is said so and nothing is sent."""
    d = page
    from selenium.webdriver.support.ui import Select
    assert not d.find_element("id", "p-tools").is_displayed()
    Select(d.find_element("id", "p-format")).select_by_value("tools")
    assert d.find_element("id", "p-tools").is_displayed() and not d.find_element("id", "p-schema").is_displayed()
    Select(d.find_element("id", "p-tool-choice")).select_by_value("required")
    set_field(d, "p-temperature", 0)
    set_field(d, "p-max-tokens", 500)  # "required" with parallel calls: the tiny model makes up to 16
    tools = json.loads(d.find_element("id", "p-tools").get_attribute("value"))  # the default list
    assert tools[0]["function"]["name"] == "get_weather"
    # a short city keeps the tiny model's call short (it writes a long name otherwise)
    tools[0]["function"]["parameters"]["properties"]["city"]["maxLength"] = 12
    set_field(d, "p-tools", json.dumps(tools))
    send(d, "What is the weather in Paris?")
    wait(lambda: "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "the call")
    status, _, body = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": tools,
        "tool_choice": "required", "temperature": 0, "max_tokens": 500})
    assert status == 200
    want = json.loads(body)["choices"][0]
    calls = last_reply(d).find_elements("css selector", ".call")
    got = [(c.find_element("css selector", ".call-name").get_attribute("textContent"),
            c.find_element("css selector", ".call-args").get_attribute("textContent")) for c in calls]
    assert got == [(t["function"]["name"], t["function"]["arguments"]) for t in want["message"]["tool_calls"]]
    assert want["finish_reason"] == "tool_calls" and "tool_calls" in last_reply(d).find_element(
        "css selector", ".stats").text
    n = len(d.find_elements("css selector", ".msg"))
    set_field(d, "p-tools", "[not json")
    send(d, "again")
    wait(lambda: "Tools" in d.find_element("id", "chat-error").text, 10, "the tools error")
    Select(d.find_element("id", "p-mode")).select_by_value("completion")
    send(d, "")
    wait(lambda: "chat mode" in d.find_element("id", "chat-error").text, 10, "the mode error")
    assert len(d.find_elements("css selector", ".msg")) == n


def test_stop_frees_the_sequence(server, page):
    d = page
    set_field(d, "p-max-tokens", 1900)
    set_field(d, "p-ignore-eos", True)
    gen0 = metric(server, "sparsed_generation_tokens_total")
    send(d, "Count to a thousand.")
    wait(lambda: last_reply(d).find_element("css selector", ".text").get_attribute("textContent"), 60,
         "the first tokens")
    assert metric(server, "sparsed_num_requests_running") == 1
    assert d.find_element("id", "send").get_attribute("disabled")
    # a script click: the streaming reply scrolls the page under a pointer click ("intercepted")
    d.execute_script("document.getElementById('stop').click()")
    wait(lambda: "stopped" in last_reply(d).find_element("css selector", ".stats").text, 20, "the stopped mark")
    wait(lambda: metric(server, "sparsed_num_requests_running") == 0, 20, "running sequences back to 0")
    assert metric(server, "sparsed_num_requests_waiting") == 0
    # The generation ended early, not by running to max_tokens.
    time.sleep(0.5)
    assert metric(server, "sparsed_generation_tokens_total") - gen0 < 1900
    assert not d.find_element("id", "send").get_attribute("disabled")
    assert d.find_element("id", "stop").get_attribute("disabled")


def traffic(server, stop, n_tokens=200):
    while not stop.is_set():
        server.post("/v1/completions", {"prompt": "Hello", "max_tokens": n_tokens, "ignore_eos": True,
                                        "temperature": 0.8})


def test_server_page_shows_throughput(server, page):
    d = page
    d.get(server.url + "/#server")
    wait(lambda: d.find_element("id", "i-model").text not in ("…", ""), 20, "the model facts")
    stop = threading.Event()
    # Two clients; a screenshot run lets the charts fill for longer.
    threads = [threading.Thread(target=traffic, args=(server, stop, n)) for n in (200, 60)]
    for t in threads:
        t.start()
    try:
        tps = wait(lambda: _num(d.find_element("id", "s-tps").text), 30, "non-zero generation tokens/s")
        wait(lambda: "/" in d.find_element("id", "s-seqs").text, 10, "sequences")
        time.sleep(30 if os.environ.get("SD_WEB_SCREENSHOTS") else 4.5)  # more samples for the charts
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert tps > 0
    info = json.loads(server.get("/info")[2])
    assert d.find_element("id", "i-model").text == info["model"]
    assert d.find_element("id", "i-ckpt").text.startswith(info["checkpoint"])
    assert d.find_element("id", "i-tp").text == "1"
    assert int(d.find_element("id", "s-gen").text) > 0
    # The CPU backend reports no GPU gauges: the GPU stat stays hidden. Its text from the gauges
    # the cuda backend reports (server/http_gpumem.c), one GPU and two.
    assert not d.find_element("id", "s-gpu-box").is_displayed()
    texts = d.execute_script("""return [
        gpuText(parseMetrics('sparsed_gpu_sm_clock_mhz{gpu="0"} 1965\\nsparsed_gpu_power_watts{gpu="0"} 641.7\\n' +
                             'sparsed_gpu_power_capped{gpu="0"} 1\\nsparsed_gpu_thermal_slowdown{gpu="0"} 0\\n')),
        gpuText(parseMetrics('sparsed_gpu_sm_clock_mhz{gpu="0"} 1980\\nsparsed_gpu_sm_clock_mhz{gpu="1"} 1710\\n' +
                             'sparsed_gpu_power_watts{gpu="1"} 699\\nsparsed_gpu_thermal_slowdown{gpu="1"} 1\\n')),
        gpuText(parseMetrics('sparsed_ready 1\\n'))];""")
    assert texts == ["1965 MHz · 642 W · power-capped", "GPU 0: 1980 MHz · 0 W; GPU 1: 1710 MHz · 699 W · hot", ""], texts
    # prefix caching is on by default and the requests above were looked up: the share of their
    # prompt tokens found cached shows; its text from the counters, with evictions and the rule
    assert d.find_element("id", "s-prefix-box").is_displayed()
    assert re.fullmatch(r"\d+ % of \d+( · \d+ blocks evicted)?", d.find_element("id", "s-prefix").text)
    pre = d.execute_script("""return [
        prefixText(parseMetrics('sparsed_prefix_cache_queries_total 73933\\nsparsed_prefix_cache_hits_total 36672\\n')),
        prefixText(parseMetrics('sparsed_prefix_cache_queries_total 1000\\nsparsed_prefix_cache_hits_total 0\\n' +
                                'sparsed_prefix_cache_evicted_blocks_total 64\\nsparsed_prefix_cache_cold_insertion 1\\n')),
        prefixText(parseMetrics('sparsed_prefix_cache_queries_total 0\\n'))];""")
    assert pre == ["50 % of 73933", "0 % of 1000 · 64 blocks evicted · cold entry", ""], pre
    # speculative decoding is off by default: its stat stays hidden; its text once drafts were run
    assert not d.find_element("id", "s-spec-box").is_displayed()
    spec = d.execute_script("""return [
        specText(parseMetrics('sparsed_spec_draft_tokens_total 1200\\nsparsed_spec_accepted_tokens_total 733\\n')),
        specText(parseMetrics('sparsed_spec_draft_tokens_total 0\\n'))];""")
    assert spec == ["61 % of 1200", ""], spec
    # The charts drew something: non-blank pixels on the throughput canvas.
    painted = d.execute_script("""
        const c = document.getElementById('c-tps'), g = c.getContext('2d');
        const px = g.getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < px.length; i += 4) if (px[i]) n++; return n;""")
    assert painted > 100
    screenshot(d, "server")


def _num(s):
    try:
        v = float(s)
    except ValueError:
        return None
    return v if v > 0 else None


def test_api_key_401_then_key(start_server):
    s = start_server(args=["--api-key", "k-web"])
    d = browser()
    try:
        d.get(s.url + "/")
        banner = wait(lambda: d.find_element("id", "banner").is_displayed() and d.find_element("id", "banner"),
                      20, "the 401 banner")
        assert "401" in banner.text and "API key" in banner.text
        assert d.find_element("id", "page-chat").is_displayed()  # the page itself is there
        screenshot(d, "unauthorized")
        set_field(d, "api-key", "k-web")
        d.find_element("id", "key-save").click()
        wait(lambda: not d.find_element("id", "banner").is_displayed(), 20, "the banner to go")
        assert d.find_element("id", "chat-model").text == json.loads(
            s.get("/info", headers={"Authorization": "Bearer k-web"})[2])["model"]
        assert d.execute_script("return sessionStorage.getItem('sparsed.apiKey')") == "k-web"
        assert d.execute_script("return localStorage.length") == 0
        set_field(d, "p-max-tokens", 8)
        send(d, "Hi")
        wait(lambda: "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "a reply")
        assert not d.find_element("id", "chat-error").is_displayed()
        # A wrong key: the chat error says 401 plainly.
        set_field(d, "api-key", "wrong")
        d.find_element("id", "key-save").click()
        send(d, "Hi")
        err = wait(lambda: d.find_element("id", "chat-error").is_displayed() and d.find_element("id", "chat-error"),
                   20, "the chat error")
        assert "401" in err.text
    finally:
        d.quit()


def histogram_quantile(q, buckets):
    """Prometheus' histogram_quantile over cumulative [(le, count)] (the reference)."""
    total = buckets[-1][1]
    if total == 0:
        return None
    rank, prev_le, prev_c = q * total, 0.0, 0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 1)
        prev_le, prev_c = le, c
    return prev_le


def test_page_percentiles_follow_prometheus(server, page):
    for _ in range(3):
        server.post("/v1/completions", {"prompt": "Hi", "max_tokens": 16, "temperature": 0.7})
    text = server.get("/metrics")[2].decode()
    for name in ("sparsed_time_to_first_token_seconds", "sparsed_inter_token_latency_seconds"):
        bk = []
        for line in text.splitlines():
            if line.startswith(name + '_bucket{le="'):
                le = line.split('"')[1]
                bk.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
        assert bk and bk[-1][1] > 0
        for q in (0.5, 0.9, 0.95, 0.99):
            got = page.execute_script("return quantile(buckets(parseMetrics(arguments[0]), arguments[1]), "
                                      "arguments[2])", text, name, q)
            assert got == pytest.approx(histogram_quantile(q, bk), rel=1e-9, abs=1e-12), (name, q)


def admin_server(start_server, tmp_path, token):
    """A daemon with the admin API on, or a skip when this tree's daemon has none yet."""
    try:
        return start_server(config={"admin_token": token, "state_dir": str(tmp_path / "state")})
    except RuntimeError as e:
        if 'unknown key "admin_token"' in str(e):
            pytest.skip("the admin API (admin_token) is not in this tree yet")
        raise


def jobs_shown(d):
    """[{id, state, text}] of the job table as the page shows it now."""
    return d.execute_script("""return [...document.querySelectorAll('#jobs-body tr[data-id]')]
        .map(r => ({id: r.dataset.id, state: r.dataset.state, text: r.innerText}));""")


def click_when_fresh(d, css, timeout=20):
    """Clicks the element matching css, looking it up again if the table re-rendered it."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt():
        try:
            d.find_element("css selector", css).click()
            return True
        except StaleElementReferenceException:
            return False
    wait(attempt, timeout, f"a fresh {css}")


def test_jobs_page_runs_a_prune_job(start_server, tmp_path):
    s = admin_server(start_server, tmp_path, "adm-web")
    out = tmp_path / "pruned-2of4"
    d = browser()
    try:
        d.get(s.url + "/#jobs")
        wait(lambda: d.find_element("id", "jobs-error").is_displayed(), 20, "the token prompt")
        set_field(d, "admin-token", "wrong")
        d.find_element("css selector", "#admin-form button").click()
        wait(lambda: "401" in d.find_element("id", "jobs-error").text, 20, "the 401 message")
        set_field(d, "admin-token", "adm-web")
        d.find_element("css selector", "#admin-form button").click()
        wait(lambda: not d.find_element("id", "jobs-error").is_displayed(), 20, "the job list")
        set_field(d, "j-budget", 64)
        set_field(d, "j-output", str(out))
        d.find_element("id", "j-start").click()
        job_id = wait(lambda: jobs_shown(d), 20, "the job's row")[0]["id"]
        status, _, body = s.get(f"/admin/v1/jobs/{job_id}", headers={"Authorization": "Bearer adm-web"})
        spec = json.loads(body)["spec"]
        assert (spec["pattern"], spec["solver"], spec["source"], spec["tokens_budget"]) == ("2:4", "sparsegpt",
                                                                                            "decode", 64)
        assert spec["prompts"] == ["The capital of France is", "Once upon a time"]
        seen = set()

        def finished():
            job = jobs_shown(d)[0]
            seen.add(job["state"])
            return job if job["state"] in ("succeeded", "failed", "cancelled") else None
        job = wait(finished, 240, "the job to finish", interval=0.2)
        assert job["state"] == "succeeded", job["text"]
        assert "running" in seen or "queued" in seen  # the page followed the job
        assert out.is_dir()
        screenshot(d, "jobs")
        click_when_fresh(d, f'#jobs-body tr[data-id="{job_id}"] button.activate')
        wait(lambda: json.loads(s.get("/admin/v1/model", headers={"Authorization": "Bearer adm-web"})[2])
             .get("path", "").rstrip("/") == str(out), 120, "the swap to the pruned checkpoint", interval=0.5)
        info = json.loads(s.get("/info")[2])
        assert (info["checkpoint"], info["sparsity"]) == ("bitmask", "2:4")
        assert not d.find_element("id", "jobs-error").is_displayed()
        assert d.execute_script("return sessionStorage.getItem('sparsed.adminToken')") == "adm-web"
    finally:
        d.quit()


def test_jobs_page_follows_a_swap_that_fails(start_server, tmp_path):
    """Activate answers 202 and the swap loads in the background: the page shows it loading, then
    its failure (the old model still serves). The load is held open by a FIFO as weights file."""
    import errno
    import shutil
    s = admin_server(start_server, tmp_path, "adm-web")
    gated = tmp_path / "gated"
    gated.mkdir()
    for f in (srv.MODEL).iterdir():
        if f.name != "model.safetensors":
            shutil.copyfile(f, gated / f.name)
    os.mkfifo(gated / "model.safetensors")
    d = browser()
    try:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {
            "source": "sessionStorage.setItem('sparsed.adminToken', 'adm-web')"})
        d.get(s.url + "/#jobs")
        wait(lambda: "tiny" in d.find_element("id", "admin-model").text, 20, "the model line")
        d.execute_script("jobs.activate(arguments[0]);", str(gated))  # what the Activate button calls
        wait(lambda: "loading " + str(gated) in d.find_element("id", "admin-model").text, 20, "the swap loading")
        deadline = time.time() + 30
        while True:  # the loader waits in open(): open the other end and close it
            try:
                os.close(os.open(gated / "model.safetensors", os.O_WRONLY | os.O_NONBLOCK))
                break
            except OSError as e:
                if e.errno != errno.ENXIO or time.time() > deadline:
                    raise
                time.sleep(0.02)
        line = wait(lambda: "failed" in (t := d.find_element("id", "admin-model").text) and t, 30, "the failure")
        assert "not a regular file" in line and line.startswith("tiny"), line
        info = json.loads(s.get("/info")[2])
        assert info["model"] == "tiny"
    finally:
        d.quit()


def test_jobs_page_with_admin_listen(start_server, tmp_path):
    """With admin_listen the main address answers 404 on /admin/: the Jobs page says where it is."""
    s = start_server(config={"admin_token": "adm-web", "state_dir": str(tmp_path / "state"),
                             "admin_listen": f"127.0.0.1:{srv.free_port()}"})
    d = browser()
    try:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {
            "source": "sessionStorage.setItem('sparsed.adminToken', 'adm-web')"})
        d.get(s.url + "/#jobs")
        text = wait(lambda: (t := d.find_element("id", "jobs-error").text) and "admin_listen" in t and t, 20,
                    "the admin_listen message")
        assert "not enabled" not in text, text
    finally:
        d.quit()


def test_jobs_page_cancels_a_job(start_server, tmp_path):
    s = admin_server(start_server, tmp_path, "adm-web")
    out = tmp_path / "never"
    d = browser()
    try:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {
            "source": "sessionStorage.setItem('sparsed.adminToken', 'adm-web')"})
        d.get(s.url + "/#jobs")
        # A budget far beyond what two short prompts yield quickly: the job is still running.
        set_field(d, "j-budget", 100000)
        set_field(d, "j-prompts", "Tell me everything\nOnce upon a time")
        set_field(d, "j-output", str(out))
        d.find_element("id", "j-start").click()
        wait(lambda: (jobs_shown(d) or [{}])[0].get("state") == "running", 60, "the job to run")
        click_when_fresh(d, "#jobs-body tr[data-id] button.cancel")
        job = wait(lambda: (jobs_shown(d)[0]["state"] in ("cancelled", "failed", "succeeded")) and jobs_shown(d)[0],
                   120, "the job to stop", interval=0.2)
        assert job["state"] == "cancelled", job["text"]
        assert not out.exists()
        assert not d.find_elements("css selector", "#jobs-body button.cancel")
        assert s.get("/ready")[0] == 200
    finally:
        d.quit()


def test_phone_layout(server):
    d = browser(phone=True)
    try:
        d.get(server.url + "/")
        wait(lambda: d.find_element("id", "chat-model").get_attribute("textContent") not in ("…", ""), 20, "the model name")
        assert d.execute_script("return window.innerWidth") == 390
        width = d.execute_script("return document.documentElement.scrollWidth")
        assert width <= 390  # no horizontal scrolling
        # One column: the parameters sit above the conversation, not beside it.
        params = d.find_element("css selector", ".params").rect
        conv = d.find_element("css selector", ".conversation").rect
        assert conv["y"] >= params["y"] + params["height"] - 1
        send(d, "Hello there")
        wait(lambda: "tokens" in last_reply(d).find_element("css selector", ".stats").text, 60, "a reply")
        assert d.execute_script("return document.documentElement.scrollWidth") <= 390
        screenshot(d, "chat-phone")
    finally:
        d.quit()


start_server = srv.start_server
