"""tools/synth_ckpt.py: random-weight checkpoints for a config, loadable by sparsed and by
Hugging Face transformers alike (greedy tokens and logits agree), deterministic per seed, and
prunable; with --pattern, bitmask checkpoints equal to their dense expansion. Uses the bundled
models/tiny (config and tokenizer) only."""
import hashlib
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "engine"))
import hfref  # noqa: E402

TINY = ROOT / "models" / "tiny"
TOOL = ROOT / "tools" / "synth_ckpt.py"
PROMPT = [5, 17, 300, 42, 7]


def synth(cfg, out, seed=0, shard_mb=1, pattern=None):
    cfg_path = out.parent / (out.name + "-config.json")
    cfg_path.write_text(json.dumps(cfg))
    r = subprocess.run([sys.executable, str(TOOL), "--config", str(cfg_path), "--tokenizer", str(TINY), "--out",
                        str(out), "--seed", str(seed), "--shard-mb", str(shard_mb)]
                       + (["--pattern", pattern] if pattern else []),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def tiny_cfg(**over):
    cfg = json.loads((TINY / "config.json").read_text())
    cfg.update(over)
    return cfg


def digest(d):
    h = hashlib.sha256()
    for f in sorted(d.glob("*.safetensors")):
        h.update(f.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("arch", ["llama", "qwen3", "qwen2"])
def test_loads_in_sparsed_and_transformers_alike(tmp_path, arch):
    over = {"llama": dict(tie_word_embeddings=False),
            "qwen3": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], tie_word_embeddings=True),
            "qwen2": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], tie_word_embeddings=False)}[arch]
    out = synth(tiny_cfg(**over), tmp_path / arch)
    shards = sorted(out.glob("*.safetensors"))
    assert len(shards) > 1, "a 1 MB shard limit must split the tiny model"  # the index is exercised
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {s.name for s in shards}
    gen, logits = hfref.run_generate(out, PROMPT, 8, tmp_path, ignore_eos=True)
    model = hfref.hf_load(out)
    hf_gen, hf_logits = hfref.hf_generate(model, PROMPT, 8, ignore_eos=True)
    assert gen == hf_gen
    assert hfref.rel_l2(logits, hf_logits) < 1e-3
    # random weights, but not degenerate: the logits vary over the vocabulary
    assert np.std(logits[0]) > 1e-3


def test_seed_decides_the_bytes(tmp_path):
    a = synth(tiny_cfg(), tmp_path / "a", seed=1, shard_mb=4096)
    b = synth(tiny_cfg(), tmp_path / "b", seed=1, shard_mb=4096)
    c = synth(tiny_cfg(), tmp_path / "c", seed=2, shard_mb=4096)
    assert digest(a) == digest(b) != digest(c)


def test_prunable_and_refuses_bad_input(tmp_path):
    out = synth(tiny_cfg(), tmp_path / "dense")
    pruned = tmp_path / "2of4"
    r = subprocess.run([hfref.sparsed_bin(), "prune", "--model", str(out), "--out", str(pruned), "--pattern", "2:4",
                        "--solver", "magnitude", "--quiet"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    gen, _ = hfref.run_generate(pruned, PROMPT, 4, tmp_path, ignore_eos=True)
    assert len(gen) == 4
    # an existing checkpoint is never overwritten; an unknown family is refused
    r = subprocess.run([sys.executable, str(TOOL), "--config", str(TINY / "config.json"), "--tokenizer", str(TINY),
                        "--out", str(out)], capture_output=True, text=True)
    assert r.returncode != 0 and "already holds" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(tiny_cfg(model_type="gpt2")))
    r = subprocess.run([sys.executable, str(TOOL), "--config", str(bad), "--tokenizer", str(TINY), "--out",
                        str(tmp_path / "x")], capture_output=True, text=True)
    assert r.returncode != 0 and "gpt2" in r.stderr


def read_tensors(d):
    """Every tensor of a checkpoint directory as numpy (bf16 as its uint16 bits)."""
    import struct

    out = {}
    for f in sorted(d.glob("*.safetensors")):
        raw = f.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        for name, v in header.items():
            if name == "__metadata__":
                continue
            a, b = v["data_offsets"]
            dt = {"U32": "<u4", "BF16": "<u2"}[v["dtype"]]
            out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt).reshape(v["shape"])
    return out


def expand_dense(src, dst):
    """The dense twin of a bitmask checkpoint: each X.nm_values / X.nm_mask pair scattered into
    X.weight (kept values in column order, zeros elsewhere), everything else copied."""
    import torch
    from safetensors.torch import save_file

    t = read_tensors(src)
    dense = {}
    for name, a in t.items():
        if name.endswith(".nm_mask"):
            continue
        if name.endswith(".nm_values"):
            base = name[: -len(".nm_values")]
            m = t[base + ".nm_mask"].astype(np.uint64)
            keep = ((m[..., None] >> np.arange(32, dtype=np.uint64)) & 1).astype(bool).reshape(m.shape[0], -1)
            w = np.zeros(keep.shape, dtype=np.uint16)
            w[keep] = a.reshape(-1)  # row-major order of the kept columns = the values' order
            name, a = base + ".weight", w
        dense[name] = torch.from_numpy(a.astype(np.int16)).view(torch.bfloat16)
    dst.mkdir()
    save_file(dense, str(dst / "model.safetensors"))
    for f in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if (src / f).exists():
            (dst / f).write_bytes((src / f).read_bytes())
    return t


@pytest.mark.parametrize("pattern", ["2:4", "4:8", "8:16", "16:32"])
def test_bitmask_pattern_is_the_dense_twin(tmp_path, pattern):
    """--pattern writes valid N:M bitmask linears (sparsed's loader checks every word) whose model
    is the dense model they expand to: sparsed on the bitmask checkpoint against transformers on
    the expanded one."""
    cfg = tiny_cfg(tie_word_embeddings=False)
    out = synth(cfg, tmp_path / "nm", seed=3, shard_mb=1, pattern=pattern)
    sp = json.loads((out / "sparsity.json").read_text())
    assert sp["format"] == "nm-bitmask-v1" and len(sp["tensors"]) == 7 * cfg["num_hidden_layers"]
    assert set(sp["tensors"].values()) == {pattern}
    t = expand_dense(out, tmp_path / "dense")
    assert "lm_head.weight" in t and not any(k.endswith(".weight") and "layers" in k and "proj" in k for k in t)
    n, m = (int(v) for v in pattern.split(":"))
    for name, a in t.items():  # every group of m columns keeps exactly n (the loader checks it too)
        if name.endswith(".nm_mask"):
            bits = (a[..., None].astype(np.uint64) >> np.arange(32, dtype=np.uint64)) & 1
            assert (bits.reshape(*a.shape, 32 // m, m).sum(-1) == n).all(), name
    gen, logits = hfref.run_generate(out, PROMPT, 8, tmp_path, ignore_eos=True)
    hf_gen, hf_logits = hfref.hf_generate(hfref.hf_load(tmp_path / "dense"), PROMPT, 8, ignore_eos=True)
    assert gen == hf_gen
    assert hfref.rel_l2(logits, hf_logits) < 1e-3
    assert np.std(logits[0]) > 1e-3


def test_bad_pattern_is_refused(tmp_path):
    for bad in ("3:4", "2:6", "x"):
        cfg_path = tmp_path / "c.json"
        cfg_path.write_text(json.dumps(tiny_cfg()))
        r = subprocess.run([sys.executable, str(TOOL), "--config", str(cfg_path), "--tokenizer", str(TINY), "--out",
                            str(tmp_path / "o"), "--pattern", bad], capture_output=True, text=True)
        assert r.returncode != 0 and "2:4, 4:8, 8:16, 16:32" in r.stderr, bad
