"""hfref: helpers for comparing `sparsed generate` with Hugging Face transformers on the CPU —
running the binary with --dump-logits, greedy generation in transformers, random tiny models."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sparsed_bin():
    """The binary under test: $SPARSED_BIN, else $SD_BUILD/sparsed (default build/)."""
    p = os.environ.get("SPARSED_BIN") or str(ROOT / os.environ.get("SD_BUILD", "build") / "sparsed")
    if not os.access(p, os.X_OK):
        pytest.skip(f"{p} not built (set SD_BUILD or SPARSED_BIN)")
    return p


def run_generate(model_dir, prompt_ids, max_tokens, tmp_path, ignore_eos=False, extra=()):
    """Greedy generation with the binary; returns (generated ids, logits [steps, vocab])."""
    dump = pathlib.Path(tmp_path) / "logits.bin"
    cmd = [sparsed_bin(), "generate", "--model", str(model_dir), "--prompt-ids",
           ",".join(str(i) for i in prompt_ids), "--max-tokens", str(max_tokens),
           "--temperature", "0", "--dump-logits", str(dump), *extra]
    if ignore_eos:
        cmd.append("--ignore-eos")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{cmd}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    meta = json.loads(dump.with_name(dump.name + ".json").read_text())
    assert meta["prompt_ids"] == list(prompt_ids)
    logits = np.fromfile(dump, dtype="<f4").reshape(-1, meta["vocab"])
    assert logits.shape[0] == len(meta["generated_ids"])
    return meta["generated_ids"], logits


def hf_load(model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    # fp32 compute from the checkpoint's (possibly bf16) weights, as the CPU backend does
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()


def hf_generate(model, prompt_ids, max_tokens, ignore_eos=False):
    """model.generate(do_sample=False); returns (generated ids, logits [steps, vocab])."""
    import torch

    ids = torch.tensor([list(prompt_ids)])
    kw = dict(do_sample=False, max_new_tokens=max_tokens, output_logits=True, return_dict_in_generate=True,
              # an explicit mask: generate would otherwise mask prompt tokens equal to pad (often BOS)
              attention_mask=torch.ones_like(ids))
    if ignore_eos:
        kw["eos_token_id"] = None
    with torch.no_grad():
        out = model.generate(ids, **kw)
    gen = out.sequences[0, len(prompt_ids):].tolist()
    logits = torch.stack(out.logits, 1)[0].float().numpy()
    return gen, logits


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


ARCHS = {
    # name: (config class, extra config keys)
    "llama3": ("LlamaConfig", dict(rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 64})),
    "llama": ("LlamaConfig", {}),
    "qwen2": ("Qwen2Config", {}),
    "qwen3": ("Qwen3Config", dict(head_dim=32)),
    "mistral": ("MistralConfig", dict(sliding_window=None)),
}


def make_random_model(arch, out_dir, dtype="bfloat16", tie=False, seed=0, intermediate=100, **over):
    """Saves a random-initialised tiny model of `arch` (save_pretrained, safetensors) and
    returns its directory. Init is wider than usual so greedy choices are not near-ties."""
    import torch
    import transformers

    cls_name, extra = ARCHS[arch]
    cfg = getattr(transformers, cls_name)(
        vocab_size=256, hidden_size=64, intermediate_size=intermediate, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=tie, initializer_range=0.08, bos_token_id=None, eos_token_id=None,
        pad_token_id=None, **{**extra, **over})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():  # norms at 1 would hide a missing norm weight
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p) if "norm" in name else 0.1 * torch.randn_like(p))
    model = model.to(getattr(torch, dtype))
    out_dir = pathlib.Path(out_dir)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    return out_dir
