"""A strict SSE reader for the tests: raw HTTP/1.1 over a socket, so framing errors show."""
import http.client
import json


def stream_request(port, path, body, timeout=300, headers=None):
    """POSTs `body` and returns (status, [event payload strings]) of a text/event-stream reply.
    Asserts the framing: every event is exactly one 'data: ...' line followed by a blank line."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
    r = conn.getresponse()
    raw = r.read().decode("utf-8")
    conn.close()
    if r.status != 200:
        return r.status, raw
    assert r.getheader("Content-Type", "").startswith("text/event-stream"), r.getheader("Content-Type")
    assert raw.endswith("\n\n"), raw[-50:]
    events = []
    for block in raw[:-2].split("\n\n"):
        assert block.startswith("data: ") and "\n" not in block, repr(block)
        events.append(block[len("data: "):])
    return 200, events


def completion_text(events):
    """Concatenated text of choice 0 of a /v1/completions stream; checks the chunk shapes."""
    assert events[-1] == "[DONE]"
    text, finish = "", None
    for e in events[:-1]:
        chunk = json.loads(e)
        assert "error" not in chunk, chunk
        assert chunk["object"] == "text_completion" and chunk["id"].startswith("cmpl-")
        (choice,) = chunk["choices"]
        assert finish is None, "a chunk after the finish_reason"
        text += choice["text"]
        finish = choice["finish_reason"]
    assert finish in ("stop", "length")
    return text
