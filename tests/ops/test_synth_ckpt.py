"""tools/synth_ckpt.py: random-weight checkpoints for a config, loadable by sparsed and by
Hugging Face transformers alike (greedy tokens and logits agree), deterministic per seed, and
prunable. Uses the bundled models/tiny (config and tokenizer) only."""
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


def synth(cfg, out, seed=0, shard_mb=1):
    cfg_path = out.parent / (out.name + "-config.json")
    cfg_path.write_text(json.dumps(cfg))
    r = subprocess.run([sys.executable, str(TOOL), "--config", str(cfg_path), "--tokenizer", str(TINY), "--out",
                        str(out), "--seed", str(seed), "--shard-mb", str(shard_mb)],
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
