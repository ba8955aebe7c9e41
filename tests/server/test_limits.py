"""Server limits. request_timeout bounds the time to receive a whole request, not only the idle time between
bytes: clients that trickle header or body bytes (slowloris) are disconnected, while a normal
client, a keep-alive connection and a long streamed answer are not. A request asking for more
sequences than the queue can ever hold is a 400 naming `n`, not a 429 to retry."""
import json
import socket
import time

from conftest import http


def trickle(port, head):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head)
    s.setblocking(False)
    return s


def closed(sock):
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_trickling_clients_are_cut_off(start_server):
    s = start_server(["--request-timeout", "2"])
    socks = [trickle(s.port, b"GET /health HTTP/1.1\r\nHost: x\r\n") for _ in range(4)]
    socks += [trickle(s.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
              for _ in range(4)]
    t0 = time.time()
    alive = list(socks)
    while alive and time.time() - t0 < 10:
        for c in alive:
            try:
                c.send(b"X-a: b\r\n" if c in socks[:4] else b" ")  # one byte-ish every 0.25 s
            except OSError:
                pass
        time.sleep(0.25)
        alive = [c for c in alive if not closed(c)]
    assert not alive, f"{len(alive)} trickling connection(s) still open after {time.time() - t0:.1f}s"
    assert time.time() - t0 < 6  # request_timeout 2 s + the 1 s reaper + slack
    for c in socks:
        c.close()
    # ordinary traffic is untouched, including a stream that outlives request_timeout
    assert http("GET", s.url + "/health")[0] == 200
    body = {"prompt": "def", "max_tokens": 600, "ignore_eos": True, "stream": True}
    c = socket.create_connection(("127.0.0.1", s.port))
    raw = json.dumps(body).encode()
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(raw) + raw)
    c.settimeout(60)
    data = b""
    while b"data: [DONE]" not in data:
        chunk = c.recv(65536)
        assert chunk, "stream cut before [DONE]"
        data += chunk
    c.close()
    assert data.startswith(b"HTTP/1.1 200")


def test_request_larger_than_the_queue_is_400_not_429(start_server):
    s = start_server(["--max-queue", "4"])
    st, _, body = http("POST", s.url + "/v1/completions", {"prompt": ["a", "b", "c"], "n": 2, "max_tokens": 1})
    err = json.loads(body)["error"]
    assert st == 400 and err["param"] == "n" and "4" in err["message"], (st, body)
    # at the bound it is admitted
    st, _, body = http("POST", s.url + "/v1/completions", {"prompt": ["a", "b"], "n": 2, "max_tokens": 1})
    assert st == 200 and len(json.loads(body)["choices"]) == 4, body
