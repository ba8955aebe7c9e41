"""Bad requests get the right status and an OpenAI error body, and the server keeps serving."""
import json
import socket
import time

import pytest

from conftest import http
from sse import stream_request


def check_error(resp, status, param=None):
    st, _, body = resp
    assert st == status, (st, body)
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        assert err["param"] == param, err
    return err


def wait_idle(s, timeout=20):
    """Waits until the engine has nothing running or waiting (after clients left)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = s.get("/metrics")[2]
        if b"sparsed_num_requests_running 0" in m and b"sparsed_num_requests_waiting 0" in m:
            return
        time.sleep(0.2)
    raise AssertionError("engine still busy: " + m.decode())


def still_serving(s):
    st, _, body = s.post("/v1/completions", {"prompt": "def", "max_tokens": 2, "temperature": 0})
    assert st == 200 and json.loads(body)["choices"][0]["finish_reason"] in ("stop", "length")


BAD_FIELDS = [
    ({"temperature": "hot"}, "temperature"), ({"temperature": -1}, "temperature"),
    ({"temperature": 1e9}, "temperature"), ({"top_p": 0}, "top_p"), ({"top_p": 1.5}, "top_p"),
    ({"top_k": -5}, "top_k"), ({"min_p": 2}, "min_p"), ({"max_tokens": -1}, "max_tokens"),
    ({"max_tokens": 1.5}, "max_tokens"), ({"max_tokens": "10"}, "max_tokens"), ({"n": 0}, "n"),
    ({"n": 100000}, "n"), ({"logprobs": 21}, "logprobs"), ({"logprobs": True}, "logprobs"),
    ({"stop": 5}, "stop"), ({"stop": ["a"] * 9}, "stop"), ({"seed": "x"}, "seed"),
    ({"stream": "yes"}, "stream"), ({"echo": 1}, "echo"), ({"presence_penalty": 3}, "presence_penalty"),
    ({"frequency_penalty": -2.5}, "frequency_penalty"), ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"stream_options": []}, "stream_options"), ({"user": 5}, "user"), ({"model": 7}, "model"),
    ({"prompt": None}, "prompt"), ({"prompt": []}, "prompt"), ({"prompt": [[-1]]}, "prompt"),
    ({"prompt": [1, "a"]}, "prompt"), ({"prompt": {"a": 1}}, "prompt"), ({"prompt": [10 ** 9]}, "prompt"),
    ({"logit_bias": [1]}, "logit_bias"), ({"logit_bias": {"x": 1}}, "logit_bias"),
    ({"logit_bias": {"-3": 1}}, "logit_bias"), ({"logit_bias": {"3": 101}}, "logit_bias"),
    ({"logit_bias": {"3": "1"}}, "logit_bias"), ({"logit_bias": {"3": 1, "03": 2}}, "logit_bias"),
    ({"logit_bias": {"99999999": 1}}, "logit_bias"),
    ({"logit_bias": {str(i): 1 for i in range(1025)}}, "logit_bias"),
    ({"response_format": {"type": "json_schema"}}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string",
                                                                                        "pattern": "(?=a)"}}}},
     "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}},
     "response_format"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"response_format": "json"}, "response_format"),
]


@pytest.mark.parametrize("patch,param", BAD_FIELDS)
def test_bad_completion_fields(server, patch, param):
    body = {"prompt": "def", "max_tokens": 2, **patch}
    if patch.get("prompt", 0) is None:
        del body["prompt"]
    err = check_error(server.post("/v1/completions", body), 400, param)
    # the engine's checks at submit (a token id outside the vocabulary, a schema keyword) name
    # their code too, as the parser's do
    assert err["code"] in ("invalid_value", "invalid_type", "missing_required_parameter", "unsupported_value",
                           "context_length_exceeded"), err


@pytest.mark.parametrize("patch,param", [
    ({"messages": None}, "messages"), ({"messages": []}, "messages"), ({"messages": "hi"}, "messages"),
    ({"messages": [{"content": "hi"}]}, "messages"), ({"messages": [{"role": "wizard", "content": "x"}]}, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages"),
    ({"top_logprobs": 3}, "top_logprobs"), ({"logprobs": True, "top_logprobs": 50}, "top_logprobs"),
    ({"max_completion_tokens": -3}, "max_completion_tokens"),
    # the bundled template never shows tools: "auto" (the default with tools) is refused
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "any"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f b"}}], "tool_choice": "required"}, "tools"),
    ({"functions": [{"name": "f"}]}, "functions"), ({"tools": {"a": 1}}, "tools"),
])
def test_bad_chat_fields(server, patch, param):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **patch}
    if patch.get("messages", 0) is None:
        del body["messages"]
    check_error(server.post("/v1/chat/completions", body), 400, param)


def test_malformed_bodies(server):
    for raw in [b"", b"{", b"[1, 2]", b"null", b"{\"prompt\": \"a\",}", b"\x00\x01",
                b"{\"prompt\": \"a\", \"prompt\": \"b\"}"]:
        check_error(server.post("/v1/completions", raw), 400)
    # invalid UTF-8 inside a JSON string
    check_error(server.post("/v1/completions", b'{"prompt": "ab\xff\xfe", "max_tokens": 2}'), 400)
    check_error(server.post("/v1/completions", b'{"prompt": "\xed\xa0\x80"}'), 400)
    still_serving(server)


def test_neutral_format_and_tool_fields_pass(server):
    """The values that ask for nothing sparsed lacks are accepted: text format, no tools, tools with
    tool_choice "none"."""
    msgs = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    for extra in [{"response_format": {"type": "text"}}, {"tools": []}, {"tools": tools, "tool_choice": "none"},
                  {"tools": None, "response_format": None}]:
        st, _, body = server.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 2, **extra})
        assert st == 200 and json.loads(body)["object"] == "chat.completion", (extra, body)


def test_unknown_fields_are_ignored(server):
    st, _, body = server.post("/v1/completions", {"prompt": "def", "max_tokens": 2, "frobnicate": [1, {"x": 2}],
                                                  "best_of": None, "suffix": None})
    assert st == 200 and json.loads(body)["object"] == "text_completion"


def test_routes_methods_models(server):
    check_error(server.get("/v1/nothing"), 404)
    check_error(server.get("/no/such/page"), 404)  # "/" is the web console (tests/web)
    check_error(server.get("/v1/completions"), 405)
    check_error(server.post("/health", {}), 405)
    check_error(server.post("/v1/completions", {"prompt": "a", "model": "gpt-17"}), 404, "model")
    st, _, _ = server.post("/v1/completions", {"prompt": "a", "max_tokens": 1, "model": "tiny"})
    assert st == 200


def test_context_limit(server):
    big = [5] * 2000
    err = check_error(server.post("/v1/completions", {"prompt": big, "max_tokens": 100}), 400)
    assert "context" in err["message"]
    check_error(server.post("/v1/completions", {"prompt": [5] * 3000, "max_tokens": 0}), 400)
    st, _, _ = server.post("/v1/completions", {"prompt": big, "max_tokens": 4, "temperature": 0})
    assert st == 200


def test_body_limits(start_server):
    s = start_server(["--max-body-bytes", "4096"])
    check_error(s.post("/v1/completions", {"prompt": "x" * 10000}), 413)
    # chunked upload without Content-Length
    conn = socket.create_connection(("127.0.0.1", s.port))
    chunk = b"x" * 3000
    conn.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                 (b"%x\r\n%s\r\n" % (len(chunk), chunk)) * 3 + b"0\r\n\r\n")
    conn.settimeout(30)
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += conn.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:100]
    conn.close()
    still_serving(s)


def test_auth(start_server):
    s = start_server(["--api-key", "sekrit-1"])
    check_error(s.post("/v1/completions", {"prompt": "a", "max_tokens": 1}), 401)
    check_error(s.post("/v1/completions", {"prompt": "a", "max_tokens": 1},
                       headers={"Authorization": "Bearer wrong"}), 401)
    check_error(s.get("/v1/models"), 401)
    st, _, _ = s.post("/v1/completions", {"prompt": "a", "max_tokens": 1},
                      headers={"Authorization": "Bearer sekrit-1"})
    assert st == 200
    assert s.get("/health")[0] == 200 and s.get("/metrics")[0] == 200
    assert "sekrit-1" not in s.log_text()


def test_disconnects_and_slowloris(start_server):
    s = start_server(["--request-timeout", "1"])
    # a body that never completes, then the client leaves
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
    c.close()
    # slowloris: a partial request line is dropped after the idle timeout
    slow = socket.create_connection(("127.0.0.1", s.port))
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    slow.settimeout(10)
    t0 = time.time()
    assert slow.recv(100) == b""  # closed by the server
    assert time.time() - t0 < 8
    slow.close()
    # a client that leaves mid-stream: its sequence is cancelled
    c = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"prompt": "def", "max_tokens": 1500, "ignore_eos": True, "stream": True}).encode()
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    c.settimeout(30)
    assert c.recv(100).startswith(b"HTTP/1.1 200")
    c.close()
    wait_idle(s)
    still_serving(s)


def test_queue_full_is_429(start_server):
    s = start_server(["--max-seqs", "1", "--max-queue", "1"])
    socks, statuses = [], []
    body = json.dumps({"prompt": "def", "max_tokens": 400, "ignore_eos": True, "stream": True}).encode()
    for _ in range(6):
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        c.settimeout(30)
        head = c.recv(4096)
        statuses.append(int(head.split()[1]))
        socks.append((c, head))
        time.sleep(0.2)
    assert 429 in statuses and statuses[0] == 200, statuses
    for c, head in socks:
        if b" 429 " in head:
            while b"\r\n\r\n" not in head or not head.rstrip().endswith(b"}"):
                head += c.recv(4096)
            err = json.loads(head.split(b"\r\n\r\n", 1)[1])["error"]
            assert err["code"] == "queue_full"
        c.close()
    wait_idle(s)  # the departed clients' sequences are cancelled
    still_serving(s)


def test_stream_error_statuses(server):
    # errors detected before the stream starts are plain HTTP errors, not SSE
    st, body = stream_request(server.port, "/v1/completions", {"prompt": [5] * 2047, "max_tokens": 5,
                                                               "stream": True})
    assert st == 400 and json.loads(body)["error"]["code"] == "context_length_exceeded"
