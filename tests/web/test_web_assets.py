"""The console's static assets as the daemon serves them: the bytes of web/*, content types,
ETag revalidation, the CSP, nothing inline that the CSP would block, the web_ui switch, and
GET /info against the model's own config.json."""
import html.parser
import json
import pathlib

import pytest

from web_helpers import ROOT, srv

WEB = ROOT / "web"
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = srv.Server(tmp_path_factory.mktemp("web"))
    try:
        yield s.wait_ready()
    finally:
        s.stop()


@pytest.mark.parametrize("name", sorted(p.name for p in WEB.iterdir()))
def test_asset_bytes_type_and_caching(server, name):
    path = "/" + name
    status, h, body = server.get(path)
    assert status == 200, body[:200]
    assert body == (WEB / name).read_bytes()
    assert h["Content-Type"].split(";")[0] == TYPES[pathlib.Path(name).suffix]
    assert h["X-Content-Type-Options"] == "nosniff"
    assert "no-cache" in h["Cache-Control"]
    etag = h["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 8
    status, h2, body = server.get(path, headers={"If-None-Match": etag})
    assert (status, body, h2["ETag"]) == (304, b"", etag)
    status, _, _ = server.get(path, headers={"If-None-Match": '"stale"'})
    assert status == 200


def test_root_is_index_with_strict_csp(server):
    status, h, body = server.get("/")
    assert status == 200 and body == (WEB / "index.html").read_bytes()
    csp = {d.split()[0]: d.split()[1:] for d in h["Content-Security-Policy"].split(";") if d.strip()}
    assert csp["default-src"] == ["'self'"]
    for k in ("script-src", "style-src"):  # nothing inline, nothing remote
        assert csp[k] == ["'self'"], csp[k]
    assert csp["frame-ancestors"] == ["'none'"]


class _Inline(html.parser.HTMLParser):
    """Collects what a strict CSP would block: inline scripts, styles, handlers, remote URLs."""

    def __init__(self):
        super().__init__()
        self.bad = []
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and "src" not in a:
            self._in = "inline <script>"
        if tag == "style":
            self.bad.append("<style> element")
        for k, v in a.items():
            if k == "style" or k.startswith("on"):
                self.bad.append(f"{tag} {k}=")
            if k in ("src", "href") and v and "//" in v:
                self.bad.append(f"remote {k}={v}")

    def handle_data(self, data):
        if self._in and data.strip():
            self.bad.append(self._in)

    def handle_endtag(self, tag):
        self._in = None


def test_index_has_nothing_inline():
    p = _Inline()
    p.feed((WEB / "index.html").read_text())
    assert p.bad == []
    js = (WEB / "app.js").read_text()
    for bad in ("eval(", "new Function", "innerHTML", "http://", "https://"):
        assert bad not in js, bad


def test_info_matches_model(server):
    status, _, body = server.get("/info")
    assert status == 200
    info = json.loads(body)
    cfg = json.loads((srv.MODEL / "config.json").read_text())
    models = json.loads(server.get("/v1/models")[2])
    assert info["model"] == models["data"][0]["id"]
    assert info["architecture"] == cfg["architectures"][0]
    assert info["n_layers"] == cfg["num_hidden_layers"]
    assert info["vocab_size"] == cfg["vocab_size"]
    assert info["hidden_size"] == cfg["hidden_size"]
    safetensors = pytest.importorskip("safetensors")
    with safetensors.safe_open(str(srv.MODEL / "model.safetensors"), "np") as f:
        has_masks = any(k.endswith(".nm_mask") for k in f.keys())
    assert info["checkpoint"] == ("bitmask" if has_masks else "dense")
    assert info["tensor_parallel_size"] == 1
    assert 0 <= info["uptime_seconds"] < 3600


def test_unknown_paths_and_methods(server):
    assert server.get("/nope.js")[0] == 404
    assert server.get("/../Makefile")[0] == 404
    status, _, body = server.post("/", {})
    assert status in (404, 405), body


def test_web_ui_off_keeps_api(start_server):
    s = start_server(args=["--web-ui", "false"])
    assert s.get("/")[0] == 404
    assert s.get("/app.js")[0] == 404
    assert s.get("/info")[0] == 200
    assert s.get("/v1/models")[0] == 200


def test_info_needs_the_api_key(start_server):
    s = start_server(args=["--api-key", "k-web"])
    status, h, body = s.get("/info")
    assert status == 401 and "API key" in json.loads(body)["error"]["message"]
    assert s.get("/info", headers={"Authorization": "Bearer k-web"})[0] == 200
    assert s.get("/")[0] == 200  # the page itself loads, then asks for the key


start_server = srv.start_server
