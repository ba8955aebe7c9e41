"""The CPU backend against Hugging Face transformers: greedy generation token for token and
the logits of every step (prefill's last position + each decode step) within 1e-3 relative L2,
on the bundled models and on random-initialised tiny models of every supported architecture."""
import json
import pathlib
import struct
import subprocess

import numpy as np
import pytest

from hfref import ROOT, hf_generate, hf_load, make_random_model, rel_l2, run_generate, sparsed_bin

TOL = 1e-3
PROMPT = ("import numpy as np\n\n\ndef moving_average(values, window):\n"
          "    \"\"\"Return the moving average of values over a window.\"\"\"\n")


def bundled(name):
    d = ROOT / "models" / name if name == "tiny" else ROOT.parent / "shared" / "models" / name
    if not (d / "config.json").exists():
        pytest.skip(f"{d} absent (the shared assets live beside the repository)")
    return d


def check_same(ours, ref, what):
    (g1, l1), (g2, l2) = ours, ref
    # the logits are compared over the common prefix first, so a divergence says where and how much
    n = 0
    while n < min(len(g1), len(g2)) and g1[n] == g2[n]:
        n += 1
    errs = [rel_l2(l1[i], l2[i]) for i in range(min(n + 1, len(l1), len(l2)))]
    assert max(errs) < TOL, f"{what}: logits differ, worst step {int(np.argmax(errs))}: {max(errs):.3g}"
    assert g1 == g2, f"{what}: tokens diverge at step {n}: ours {g1[n:n+5]}, HF {g2[n:n+5]}"


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_bundled_greedy_matches_hf(name, tmp_path):
    from tokenizers import Tokenizer

    d = bundled(name)
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    cfg = json.loads((d / "config.json").read_text())
    prompt = [cfg["bos_token_id"]] + tok.encode(PROMPT, add_special_tokens=False).ids
    assert len(prompt) > 16  # spans more than one 16-token KV block
    ours = run_generate(d, prompt, 64, tmp_path)
    ref = hf_generate(hf_load(d), prompt, 64)
    check_same(ours, ref, name)
    assert len(ours[0]) > 1


def test_prompt_text_uses_the_tokenizer(tmp_path):
    """--prompt TEXT encodes as HF's tokenizer (with its special tokens) and streams the text
    that decoding the generated ids gives."""
    from transformers import AutoTokenizer

    d = bundled("tiny")
    tok = AutoTokenizer.from_pretrained(str(d))
    ids = tok(PROMPT)["input_ids"]
    ref_gen, _ = hf_generate(hf_load(d), ids, 24, ignore_eos=True)
    r = subprocess.run([sparsed_bin(), "generate", "--model", str(d), "--prompt", PROMPT, "--max-tokens", "24",
                        "--ignore-eos", "--temperature", "0", "--dump-logits", str(tmp_path / "l.bin")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "l.bin.json").read_text())
    assert meta["prompt_ids"] == ids
    assert meta["generated_ids"] == ref_gen
    assert r.stdout.rstrip("\n") == tok.decode(ref_gen, skip_special_tokens=True).rstrip("\n")
    assert f"prompt tokens: {len(ids)}, generated tokens: 24" in r.stderr


RANDOM_CASES = [(arch, tie, dt) for arch in ["llama3", "llama", "qwen2", "qwen3", "mistral"]
                for tie in (False, True) for dt in ("bfloat16", "float32")]


@pytest.mark.parametrize("arch,tie,dtype", RANDOM_CASES)
def test_random_model_matches_hf(arch, tie, dtype, tmp_path):
    d = make_random_model(arch, tmp_path / "m", dtype=dtype, tie=tie, seed=len(arch) + 10 * tie)
    prompt = [int(x) for x in np.random.default_rng(1).integers(0, 256, 40)]  # 40 > 2 KV blocks
    ours = run_generate(d, prompt, 8, tmp_path, ignore_eos=True)
    ref = hf_generate(hf_load(d), prompt, 8, ignore_eos=True)
    assert len(ours[0]) == 8
    check_same(ours, ref, f"{arch} tie={tie} {dtype}")


def test_random_llama3_rope_scaling_matters(tmp_path):
    """The llama3 model above is only a check of the scaling if the scaling changes the result."""
    a = make_random_model("llama3", tmp_path / "a", dtype="float32")
    b = make_random_model("llama", tmp_path / "b", dtype="float32", rope_parameters={"rope_type": "default",
                                                                                  "rope_theta": 500000.0})
    prompt = list(range(3, 43))
    _, la = run_generate(a, prompt, 1, tmp_path / "a")
    _, lb = run_generate(b, prompt, 1, tmp_path / "b")
    assert rel_l2(la[0], lb[0]) > 10 * TOL


def write_safetensors(path, tensors, metadata):
    """tensors: name -> (dtype string, shape, raw bytes)."""
    header, off = {"__metadata__": metadata}, 0
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, (_, _, raw) in tensors.items():
            f.write(raw)


def prune_2of4(w):
    """Keeps the 2 largest |w| of every 4 consecutive columns; returns (pruned, keep mask)."""
    g = np.abs(w).reshape(w.shape[0], -1, 4)
    order = np.argsort(-g, axis=2, kind="stable")
    keep = np.zeros_like(g, dtype=bool)
    np.put_along_axis(keep, order[:, :, :2], True, axis=2)
    keep = keep.reshape(w.shape)
    return np.where(keep, w, 0).astype(np.float32), keep


def test_bitmask_checkpoint_matches_hf_on_pruned_weights(tmp_path):
    """A 2:4 bitmask checkpoint (nm_values / nm_mask) gives the logits HF computes from the
    same pruned weights stored densely."""
    import torch
    from safetensors.torch import load_file

    src = make_random_model("llama", tmp_path / "src", dtype="bfloat16", intermediate=128)
    sd = load_file(str(src / "model.safetensors"))
    dense_dir, sparse_dir = tmp_path / "dense", tmp_path / "sparse"
    dense_dir.mkdir()
    sparse_dir.mkdir()
    dense, sparse, meta = {}, {}, {}
    for name, t in sd.items():
        raw_bf16 = t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
        lin = name.endswith("_proj.weight") and ".layers." in name
        if not lin:
            dense[name] = sparse[name] = ("BF16", t.shape, raw_bf16)
            continue
        w, keep = prune_2of4(t.float().numpy())
        wb = torch.from_numpy(w).to(torch.bfloat16)
        dense[name] = ("BF16", w.shape, wb.view(torch.int16).numpy().tobytes())
        rows, cols = w.shape
        vals = wb.view(torch.int16).numpy()[keep].reshape(rows, cols // 2)  # row-major: column order
        bits = keep.reshape(rows, cols // 32, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)
        mask = bits.sum(axis=2).astype("<u4")
        base = name[: -len(".weight")]
        sparse[base + ".nm_values"] = ("BF16", vals.shape, vals.astype("<i2").tobytes())
        sparse[base + ".nm_mask"] = ("U32", mask.shape, mask.tobytes())
        meta["sparsity." + base] = "2:4"
    for d, tensors in ((dense_dir, dense), (sparse_dir, sparse)):
        (d / "config.json").write_text((src / "config.json").read_text())
        write_safetensors(d / "model.safetensors", tensors, meta if d == sparse_dir else {"format": "pt"})
    prompt = [int(x) for x in np.random.default_rng(2).integers(0, 256, 37)]
    ours = run_generate(sparse_dir, prompt, 8, tmp_path, ignore_eos=True)
    ref = hf_generate(hf_load(dense_dir), prompt, 8, ignore_eos=True)
    check_same(ours, ref, "2:4 bitmask")
