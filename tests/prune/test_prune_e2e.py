"""End to end: `sparsed prune` on the bundled models (decode, text and tokens calibration; SparseGPT,
Wanda, magnitude; one-shot and sequential), the written checkpoint checked tensor by tensor
against the dense one with the `safetensors` library, loaded and run by `sparsed generate`, and
`sparsed eval` showing decode-calibrated SparseGPT closer to the dense model than magnitude
pruning. Budgets are small so the suite stays within CI time on 2 cores."""
import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SD_SHARED_DIR", ROOT.parent / "shared"))
TINY = ROOT / "models" / "tiny"
CALIB_TEXT = ROOT / "tests" / "fixtures" / "prune" / "calib_stdlib.txt"
EVAL_TEXT = ROOT / "tests" / "fixtures" / "prune" / "heldout_stdlib_tests.txt"
PROMPTS = ROOT / "prune" / "prompts" / "calib_code_prose.jsonl"
EVAL_PROMPTS = ROOT / "prune" / "prompts" / "eval_code_prose.jsonl"
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def sparsed():
    p = os.environ.get("SPARSED_BIN") or str(ROOT / os.environ.get("SD_BUILD", "build") / "sparsed")
    if not os.path.exists(p):
        pytest.skip(f"{p} not built (set SD_BUILD or SPARSED_BIN)")
    return p


def small():
    p = SHARED / "models" / "small"
    if not (p / "config.json").exists():
        pytest.skip(f"{p} is absent (../shared beside the clone)")
    return p


def prune(model, out, *args):
    r = subprocess.run([sparsed(), "prune", "--model", str(model), "--out", str(out), "--threads", "2", *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r


def evaluate(model, ref, *args):
    r = subprocess.run([sparsed(), "eval", "--model", str(model), "--ref", str(ref), "--threads", "2", *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


NP_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "U32": np.uint32, "I32": np.int32}


def load_file(path):
    """A safetensors file as {name: numpy array} (BF16 as raw uint16), read by hand; the file is
    also opened with the `safetensors` library, which validates the header and offsets."""
    with safe_open(path, framework="pt") as f:
        names = set(f.keys())
    raw = Path(path).read_bytes()
    hlen = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + hlen])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + hlen + b:8 + hlen + end], NP_DTYPES[e["dtype"]]).reshape(e["shape"])
    assert set(out) == names
    return out


def dense_tensors(model):
    t = {}
    for f in sorted(Path(model).glob("*.safetensors")):
        t.update(load_file(str(f)))
    return t


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def check_checkpoint(dense_dir, out, pattern, n_layers):
    """Every linear is a valid bitmask pair of the pattern; everything else equals the dense
    checkpoint byte for byte; sparsity.json and the safetensors metadata agree."""
    dense = dense_tensors(dense_dir)
    pruned = load_file(str(out / "model.safetensors"))
    sp = json.loads((out / "sparsity.json").read_text())
    assert sp["format"] == "nm-bitmask-v1"
    prov = sp["provenance"]
    for key in ("dense_sha256", "solver", "calibration", "calibration_tokens", "damping", "block_size", "mode",
                "created", "input_sha256"):
        assert key in prov
    h = hashlib.sha256()  # the dense files in name order (hashed on a thread while the job ran)
    for f in sorted(Path(dense_dir).glob("*.safetensors")):
        h.update(f.read_bytes())
    assert prov["dense_sha256"] == h.hexdigest()
    n, m = (0, 0) if pattern == "unstructured" else map(int, pattern.split(":"))
    for l in range(n_layers):
        for lin in LINEARS:
            base = f"model.layers.{l}.{lin}"
            assert sp["tensors"][base] == pattern
            assert base + ".weight" not in pruned
            w = dense[base + ".weight"]
            rows, cols = w.shape
            vals, mask = pruned[base + ".nm_values"], pruned[base + ".nm_mask"]
            assert vals.shape == (rows, cols // 2) and mask.shape == (rows, cols // 32)
            bits = ((mask[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1).reshape(rows, cols).astype(bool)
            if m:
                assert (bits.reshape(rows, cols // m, m).sum(axis=2) == n).all()
            assert (bits.sum(axis=1) == cols // 2).all()
    for name, t in dense.items():
        if name.endswith(".weight") and any(name.endswith(lin + ".weight") for lin in LINEARS):
            continue
        assert name in pruned and pruned[name].dtype == t.dtype and np.array_equal(pruned[name], t), name
    with open(out / "model.safetensors", "rb") as f:
        hlen = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(hlen))["__metadata__"]
    assert meta["sparsity.format"] == "nm-bitmask-v1"
    assert all(meta[f"sparsity.{k}"] == v for k, v in sp["tensors"].items())


def generate(model):
    r = subprocess.run([sparsed(), "generate", "--model", str(model), "--prompt", "def parse(path):",
                        "--max-tokens", "16", "--threads", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "generated tokens:" in r.stderr and r.stdout.strip(), r.stderr


def test_small_decode_sparsegpt_beats_magnitude(tmp_path):
    """decode calibration (greedy generations from our prompts, decode rows only) at 2:4 on the
    small model; fidelity to the dense model measured on the dense model's own continuations."""
    model = small()
    out, mag = tmp_path / "sgpt24", tmp_path / "mag24"
    r = prune(model, out, "--pattern", "2:4", "--source", "decode", "--prompts", str(PROMPTS),
              "--tokens-budget", "2048", "--max-new-tokens", "64", "--save-tokens", str(tmp_path / "calib.jsonl"))
    assert "2048" in r.stdout or "calibration tokens" in r.stdout
    check_checkpoint(model, out, "2:4", 8)
    prov = json.loads((out / "sparsity.json").read_text())["provenance"]
    assert prov["calibration"] == "decode" and 0 < prov["calibration_tokens"] <= 2048
    seqs = [json.loads(x) for x in (tmp_path / "calib.jsonl").read_text().splitlines()]
    assert sum(len(s["tokens"]) - s["prefill_len"] for s in seqs) >= 2048
    prune(model, mag, "--pattern", "2:4", "--solver", "magnitude")
    generate(out)
    args = ("--prompts", str(EVAL_PROMPTS), "--gen-tokens", "24", "--text", str(EVAL_TEXT), "--max-tokens", "1024")
    e_sgpt, e_mag = evaluate(out, model, "--ref-ppl", *args), evaluate(mag, model, *args)
    assert e_sgpt["kl_tokens"] > 0 and e_sgpt["ppl_tokens"] > 0
    assert e_sgpt["kl"] < e_mag["kl"], (e_sgpt, e_mag)
    assert e_sgpt["ppl"] < e_mag["ppl"], (e_sgpt, e_mag)
    assert e_sgpt["ref_ppl"] < e_sgpt["ppl"]


@pytest.mark.parametrize("pattern,solver,mode", [("8:16", "sparsegpt", "sequential"),
                                                 ("unstructured", "wanda", "oneshot"),
                                                 ("16:32", "sparsegpt", "oneshot"),
                                                 ("4:8", "magnitude", "oneshot")])
def test_tiny_text_patterns(tmp_path, pattern, solver, mode):
    out = tmp_path / "out"
    prune(TINY, out, "--pattern", pattern, "--solver", solver, "--mode", mode, "--text", str(CALIB_TEXT),
          "--tokens-budget", "1024", "--seq-len", "256")
    check_checkpoint(TINY, out, pattern, 4)
    generate(out)


def test_tokens_source_reuses_saved_sequences(tmp_path):
    """--save-tokens of a decode run fed back with --source tokens gives the same Hessians, so the
    same checkpoint bit for bit."""
    a, b, seqs = tmp_path / "a", tmp_path / "b", tmp_path / "seqs.jsonl"
    prune(TINY, a, "--pattern", "2:4", "--prompts", str(PROMPTS), "--tokens-budget", "512",
          "--max-new-tokens", "32", "--mode", "sequential", "--save-tokens", str(seqs))
    prune(TINY, b, "--pattern", "2:4", "--tokens", str(seqs), "--mode", "sequential")
    ta, tb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert ta.keys() == tb.keys()
    for k in ta:
        assert np.array_equal(ta[k], tb[k]), k


def test_refusals(tmp_path):
    out = tmp_path / "o"
    cases = [["--pattern", "3:4", "--text", str(CALIB_TEXT)],
             ["--pattern", "2:4", "--text", str(tmp_path / "missing.txt")],
             ["--pattern", "2:4", "--solver", "obs", "--text", str(CALIB_TEXT)],
             ["--pattern", "2:4", "--block-size", "100", "--text", str(CALIB_TEXT)]]
    for args in cases:
        r = subprocess.run([sparsed(), "prune", "--model", str(TINY), "--out", str(out), *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and "sparsed prune" in r.stderr, args
        assert not out.exists() and not list(tmp_path.glob("o.tmp-*"))
