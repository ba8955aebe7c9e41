#!/usr/bin/env python3
"""synth_ckpt: writes a dense checkpoint with random weights for a model config (a Hugging Face
config.json, e.g. config/presets/llama-3.1-8b.json) and a tokenizer directory, so that the real
serving path (`sparsed serve --model DIR`, `sparsed prune`, the load tests) can run at 8B-70B
shapes without downloading weights. `sparsed bench decode --preset` generates weights on the GPU
instead; this tool is for everything that loads a checkpoint from disk.

The files are what a Hugging Face export holds: config.json (the given one), generation_config.json,
the tokenizer's tokenizer.json / tokenizer_config.json, and bf16 safetensors shards with an index.
Linear weights are uniform in ±1/sqrt(in_features) (activations stay bounded through the layers),
norms are 1, embeddings uniform in ±0.02. The same seed gives the same bytes.

Usage: tools/synth_ckpt.py --config CONFIG.json --tokenizer DIR --out DIR [--seed N] [--shard-mb N]
Families: llama, mistral, qwen2 (q/k/v bias), qwen3 (q/k norms). Tensors stream to disk in chunks
of CHUNK values drawn on all cores (each chunk from its own generator seeded by (seed, tensor,
chunk), so the bytes do not depend on the core count); memory stays at a few chunks per core.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import struct
import sys
import time

import numpy as np


def bf16_bytes(a):
    """fp32 array -> bf16 bytes, rounded to nearest even (NaN-free input)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16).tobytes()


def tensor_list(cfg):
    """(name, shape, kind) for every tensor of the model, in checkpoint order."""
    mt = cfg.get("model_type", "llama")
    if mt not in ("llama", "mistral", "qwen2", "qwen3"):
        raise SystemExit(f"synth_ckpt: model_type {mt!r} (llama, mistral, qwen2, qwen3)")
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or h // nh
    bias = mt == "qwen2" or cfg.get("attention_bias", False)
    out = [("model.embed_tokens.weight", (vocab, h), "embed")]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (h,), "norm"),
                (p + "self_attn.q_proj.weight", (nh * hd, h), "linear"),
                (p + "self_attn.k_proj.weight", (nkv * hd, h), "linear"),
                (p + "self_attn.v_proj.weight", (nkv * hd, h), "linear")]
        if bias:
            out += [(p + f"self_attn.{x}_proj.bias", (n * hd,), "bias") for x, n in (("q", nh), ("k", nkv), ("v", nkv))]
        if mt == "qwen3":
            out += [(p + "self_attn.q_norm.weight", (hd,), "norm"), (p + "self_attn.k_norm.weight", (hd,), "norm")]
        out += [(p + "self_attn.o_proj.weight", (h, nh * hd), "linear"),
                (p + "post_attention_layernorm.weight", (h,), "norm"),
                (p + "mlp.gate_proj.weight", (inter, h), "linear"),
                (p + "mlp.up_proj.weight", (inter, h), "linear"),
                (p + "mlp.down_proj.weight", (h, inter), "linear")]
    out.append(("model.norm.weight", (h,), "norm"))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", (vocab, h), "linear"))
    return out


CHUNK = 1 << 24  # values per generator draw


def chunk_bytes(seed, ti, ci, n, shape, kind):
    """bf16 bytes of values [ci * CHUNK, ci * CHUNK + n) of tensor ti (numpy drops the GIL here)."""
    if kind == "norm":
        return bf16_bytes(np.ones(n, dtype=np.float32))
    scale = 0.02 if kind in ("embed", "bias") else 1.0 / np.sqrt(shape[-1])
    rng = np.random.default_rng([seed, ti, ci])
    return bf16_bytes((rng.random(n, dtype=np.float32) * 2.0 - 1.0) * np.float32(scale))


def shards(tensors, limit):
    """Groups (index, name, shape, kind) tensors into shards of at most `limit` bytes (a bigger
    tensor gets its own)."""
    out, cur, size = [], [], 0
    for t in tensors:
        b = int(np.prod(t[2])) * 2
        if cur and size + b > limit:
            out.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    if cur:
        out.append(cur)
    return out


def write_shard(path, group, seed, pool, progress):
    header, off = {}, 0
    for _, name, shape, _ in group:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)  # data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for ti, name, shape, kind in group:
            n = int(np.prod(shape))
            jobs = [(ci, min(CHUNK, n - ci * CHUNK)) for ci in range((n + CHUNK - 1) // CHUNK)]
            for b in pool.map(lambda j: chunk_bytes(seed, ti, j[0], j[1], shape, kind), jobs):
                f.write(b)
                progress(len(b))
    os.replace(tmp, path)
    return off


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="Hugging Face config.json of the model")
    ap.add_argument("--tokenizer", required=True, help="directory with tokenizer.json (and tokenizer_config.json)")
    ap.add_argument("--out", required=True, help="output directory (created; must not hold a checkpoint)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard-mb", type=int, default=4096, help="shard size limit (default 4096 MB)")
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    tok = os.path.join(a.tokenizer, "tokenizer.json")
    if not os.path.isfile(tok):
        raise SystemExit(f"synth_ckpt: {tok}: no such file")
    os.makedirs(a.out, exist_ok=True)
    if any(f.endswith(".safetensors") for f in os.listdir(a.out)):
        raise SystemExit(f"synth_ckpt: {a.out} already holds safetensors files")
    tensors = tensor_list(cfg)
    total = sum(int(np.prod(s)) * 2 for _, s, _ in tensors)
    groups = shards([(i,) + t for i, t in enumerate(tensors)], a.shard_mb << 20)
    pool = concurrent.futures.ThreadPoolExecutor(max(1, min(32, os.cpu_count() or 1)))
    done, t0 = 0, time.time()
    tty = sys.stderr.isatty()

    def progress(n):
        nonlocal done
        done += n
        if tty:
            el = time.time() - t0
            eta = el / done * (total - done) if done else 0
            sys.stderr.write(f"\r{done / 2**30:7.2f} / {total / 2**30:.2f} GiB, {el:5.0f} s, eta {eta:4.0f} s")

    names = [f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
    weight_map = {}
    for fname, g in zip(names, groups):
        write_shard(os.path.join(a.out, fname), g, a.seed, pool, progress)
        weight_map.update({t[1]: fname for t in g})
    pool.shutdown()
    if tty:
        sys.stderr.write("\n")
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    gen = {"bos_token_id": cfg.get("bos_token_id"), "eos_token_id": cfg.get("eos_token_id"), "do_sample": False}
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=1)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(a.tokenizer, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(a.out, name))
    print(f"synth_ckpt: {a.out}: {len(tensors)} tensors, {total / 2**30:.2f} GiB in {len(groups)} shard(s), "
          f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
