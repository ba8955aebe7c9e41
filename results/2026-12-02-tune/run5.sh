#!/usr/bin/env bash
# Eleventh session, fifth GPU call (the device budget's last ~4 minutes, so no build there: the
# daemon built on the CI-like machine for sm_90 and carried as build/sparsed): is the SwiGLU
# epilogue why Qwen3-32B and Llama-3.3-70B 2:4 batch 1 decode slower than in the ninth session
# (r3: 11.13 against 10.24 ms, 20.80 against 20.00)? SD_SWIGLU_FUSE=0 against the default.
#   bash results/2026-12-02-tune/run5.sh    (.debs and build/sparsed carried)
source tools/device_env.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
one() { # NAME FUSE PRESET
    SD_SWIGLU_FUSE=$2 timeout 60 build/sparsed bench decode --preset "config/presets/$3.json" --pattern 2:4 \
        --batch 1 --ctx 512 --out "$OUT/decode-$1.md" >>"$OUT/decode.log" 2>&1
    echo "$1 rc=$? $(grep -E '^\| 2:4' "$OUT/decode-$1.md")" | tee -a "$OUT/summary.txt"
}
one q32-f0-1 0 qwen3-32b
one q32-f1-1 1 qwen3-32b
one l70-f0 0 llama-3.3-70b
one l70-f1 1 llama-3.3-70b
one q32-f0-2 0 qwen3-32b
one q32-f1-2 1 qwen3-32b
