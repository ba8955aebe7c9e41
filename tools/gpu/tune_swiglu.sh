#!/usr/bin/env bash
# tools/gpu/tune_swiglu.sh: what the tenth session left for the GPU (kernels/NOTES.md v16 "Next").
# Run from the repo root with .debs carried; copy it into results/<date>/ first if its output is
# to be kept there (it writes $OUT/r.tgz through tools/gpu_ab.sh):
#   bash tools/gpu/tune_swiglu.sh
# 1. The tuning cache's GPU test (a second backend times nothing and matches the first bit for
#    bit; foreign and damaged files rewritten), the SwiGLU epilogue's kernel and engine tests.
# 2. One decode run fills a tuning cache; then the SwiGLU modes (SD_SWIGLU_FUSE 0 / 1 / 2)
#    alternated twice with every run loading that cache, so that all of them run the same
#    kernels and the A/B shows the fusion alone; two more default runs show what spread is left.
source tools/gpu_ab.sh
ab_build
ab_test tune_cache_gpu build/gpu/tests/engine/test_tune_cache_gpu 200
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 200
ab_test swiglu_fuse build/gpu/tests/engine/test_swiglu_fuse_gpu 200
ab_pack
PATS=dense,2:4,4:8,8:16,16:32
AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode fill "$NEW_BIN" llama-3.1-8b $PATS 1,2,4,16
for k in 1 2; do
    for m in 0 1 2; do
        SD_SWIGLU_FUSE=$m AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode sw$m-$k "$NEW_BIN" llama-3.1-8b \
            $PATS 1,2,4,16
    done
    ab_pack
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
