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

With --pattern N:M (2:4, 4:8, 8:16, 16:32) the layers' linears are written as bitmask tensors
(docs/checkpoint-format.md: X.nm_values, X.nm_mask, the pattern in each shard's __metadata__ and in
sparsity.json) with a uniformly random valid mask, so that the sparse serving path can run at 8B-70B
shapes without the minutes a prune of a 16 GB dense checkpoint takes; lm_head stays dense.

Usage: tools/synth_ckpt.py --config CONFIG.json --tokenizer DIR --out DIR [--seed N] [--shard-mb N]
                           [--pattern N:M]
Families: llama, mistral, qwen2 (q/k/v bias), qwen3 (q/k norms). Tensors stream to disk in chunks
of CHUNK values drawn on all cores (each chunk from its own generator seeded by (seed, tensor,
chunk), so the bytes do not depend on the core count); memory stays at a few chunks per core.
"""
import argparse
import concurrent.futures
import datetime
import functools
import itertools
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


def tensor_list(cfg, sparse=False):
    """(name, shape, kind) for every tensor of the model, in checkpoint order; with sparse, each
    layer linear X [rows, cols] is X.nm_values [rows, cols/2] and X.nm_mask [rows, cols/32]."""
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
    if sparse:
        out = [t for t0 in out for t in bitmask_pair(*t0)]
    out.append(("model.norm.weight", (h,), "norm"))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", (vocab, h), "linear"))  # dense, as the pruner leaves it
    return out


def bitmask_pair(name, shape, kind):
    """A layer linear's two bitmask tensors (anything else as it is)."""
    if kind != "linear":
        return [(name, shape, kind)]
    rows, cols = shape
    if cols % 32:
        raise SystemExit(f"synth_ckpt: {name}: {cols} columns, not a multiple of 32 (bitmask format)")
    base = name[: -len(".weight")]
    return [(base + ".nm_values", (rows, cols // 2), "nm_values"), (base + ".nm_mask", (rows, cols // 32), "nm_mask")]


def elem_bytes(kind):
    return 4 if kind == "nm_mask" else 2


def parse_pattern(text):
    """'N:M' with N = M/2 and M in 4, 8, 16, 32 -> (n, m)."""
    try:
        n, m = (int(v) for v in text.split(":"))
    except ValueError:
        n = m = 0
    if m not in (4, 8, 16, 32) or 2 * n != m:
        raise SystemExit(f"synth_ckpt: --pattern {text!r}: one of 2:4, 4:8, 8:16, 16:32")
    return n, m


@functools.lru_cache(maxsize=None)
def group_table(n, m):
    """Every m-bit group with n bits set, as uint32 (6 for 2:4, 70 for 4:8, 12870 for 8:16)."""
    return np.array([sum(1 << i for i in c) for c in itertools.combinations(range(m), n)], dtype=np.uint32)


def mask_words(rng, count, n, m):
    """count uint32 mask words, each group of m bits holding n set bits, uniformly at random."""
    if m == 32:  # C(32, 16) groups: too many for a table, so the 16 lowest of 32 random keys
        keep = np.argpartition(rng.random((count, 32), dtype=np.float32), 16, axis=1)[:, :16]
        return np.bitwise_or.reduce(np.left_shift(np.uint32(1), keep.astype(np.uint32)), axis=1).astype(np.uint32)
    t = group_table(n, m)
    idx = rng.integers(0, len(t), size=(count, 32 // m))
    words = np.zeros(count, dtype=np.uint32)
    for k in range(32 // m):
        words |= t[idx[:, k]] << np.uint32(k * m)
    return words


CHUNK = 1 << 24  # values per generator draw (mask words: CHUNK / 32, the same columns)


def chunk_len(kind):
    return CHUNK // 32 if kind == "nm_mask" else CHUNK


def chunk_bytes(seed, ti, ci, n, shape, kind, nm=None):
    """Bytes of elements [ci * chunk, ci * chunk + n) of tensor ti (numpy drops the GIL here):
    bf16 values, or for nm_mask uint32 words of pattern nm = (n, m)."""
    if kind == "norm":
        return bf16_bytes(np.ones(n, dtype=np.float32))
    rng = np.random.default_rng([seed, ti, ci])
    if kind == "nm_mask":
        return mask_words(rng, n, *nm).astype("<u4").tobytes()
    in_features = shape[-1] * 2 if kind == "nm_values" else shape[-1]
    scale = 0.02 if kind in ("embed", "bias") else 1.0 / np.sqrt(in_features)
    return bf16_bytes((rng.random(n, dtype=np.float32) * 2.0 - 1.0) * np.float32(scale))


def shards(tensors, limit):
    """Groups (index, name, shape, kind) tensors into shards of at most `limit` bytes (a bigger
    tensor gets its own)."""
    out, cur, size = [], [], 0
    for t in tensors:
        b = int(np.prod(t[2])) * elem_bytes(t[3])
        if cur and size + b > limit:
            out.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    if cur:
        out.append(cur)
    return out


def linear_name(name):
    return name.rsplit(".", 1)[0]


def write_shard(path, group, seed, pool, progress, nm=None):
    header, off = {}, 0
    if nm:  # each shard names the patterns of its bitmask tensors (docs/checkpoint-format.md)
        meta = {"sparsity.format": "nm-bitmask-v1"}
        meta.update({f"sparsity.{linear_name(t[1])}": f"{nm[0]}:{nm[1]}" for t in group if t[3] == "nm_values"})
        header["__metadata__"] = meta
    for _, name, shape, kind in group:
        n = int(np.prod(shape)) * elem_bytes(kind)
        dtype = "U32" if kind == "nm_mask" else "BF16"
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)  # data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for ti, name, shape, kind in group:
            n, c = int(np.prod(shape)), chunk_len(kind)
            jobs = [(ci, min(c, n - ci * c)) for ci in range((n + c - 1) // c)]
            for b in pool.map(lambda j: chunk_bytes(seed, ti, j[0], j[1], shape, kind, nm), jobs):
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
    ap.add_argument("--pattern", help="N:M (2:4, 4:8, 8:16, 16:32): the layers' linears as random bitmask weights")
    a = ap.parse_args()
    nm = parse_pattern(a.pattern) if a.pattern else None
    cfg = json.load(open(a.config))
    tok = os.path.join(a.tokenizer, "tokenizer.json")
    if not os.path.isfile(tok):
        raise SystemExit(f"synth_ckpt: {tok}: no such file")
    os.makedirs(a.out, exist_ok=True)
    if any(f.endswith(".safetensors") for f in os.listdir(a.out)):
        raise SystemExit(f"synth_ckpt: {a.out} already holds safetensors files")
    tensors = tensor_list(cfg, sparse=nm is not None)
    total = sum(int(np.prod(s)) * elem_bytes(k) for _, s, k in tensors)
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
        write_shard(os.path.join(a.out, fname), g, a.seed, pool, progress, nm)
        weight_map.update({t[1]: fname for t in g})
    pool.shutdown()
    if tty:
        sys.stderr.write("\n")
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    if nm:
        pat = f"{nm[0]}:{nm[1]}"
        created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        sp = {"format": "nm-bitmask-v1",
              "tensors": {linear_name(t[0]): pat for t in tensors if t[2] == "nm_values"},
              "provenance": {"solver": "random (tools/synth_ckpt.py: random weights, uniform random mask)",
                             "seed": a.seed, "created": created}}
        with open(os.path.join(a.out, "sparsity.json"), "w") as f:
            json.dump(sp, f, indent=1)
    gen = {"bos_token_id": cfg.get("bos_token_id"), "eos_token_id": cfg.get("eos_token_id"), "do_sample": False}
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=1)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        src = os.path.join(a.tokenizer, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(a.out, name))
    kind = f"{nm[0]}:{nm[1]} bitmask linears" if nm else "dense"
    print(f"synth_ckpt: {a.out}: {len(tensors)} tensors ({kind}), {total / 2**30:.2f} GiB in {len(groups)} "
          f"shard(s), {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
