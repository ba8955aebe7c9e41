"""Every key documented in config/README.md's table is accepted by `sparsed serve` (with its
default value, and the config printed back carries it), and a misspelt copy of each is rejected
with an error naming it."""
import json
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from conftest import ROOT, sparsed_bin  # noqa: E402


def documented_keys():
    text = (ROOT / "config" / "README.md").read_text()
    return re.findall(r"^\| `([a-z_]+)` \|", text, re.M)


def print_config(cfg_path):
    return subprocess.run([sparsed_bin(), "serve", "--config", str(cfg_path), "--print-config"],
                          capture_output=True, text=True, cwd=cfg_path.parent, timeout=60)


def test_every_documented_key_accepted_and_misspelling_rejected(tmp_path):
    keys = documented_keys()
    assert len(keys) >= 20, keys
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    r = print_config(empty)
    assert r.returncode == 0, r.stderr
    defaults = json.loads(r.stdout)
    assert set(keys) == set(defaults), set(keys) ^ set(defaults)
    cfg = tmp_path / "c.json"
    for k in keys:
        cfg.write_text(json.dumps({k: defaults[k]}))
        r = print_config(cfg)
        assert r.returncode == 0, (k, r.stderr)
        assert k in json.loads(r.stdout)
        bad = k[:-1] + ("x" if k[-1] != "x" else "y")
        cfg.write_text(json.dumps({bad: defaults[k]}))
        r = print_config(cfg)
        assert r.returncode == 2 and bad in r.stderr, (bad, r.returncode, r.stderr)
