#!/usr/bin/env bash
# Eleventh session, first GPU call: the tenth session's untested GPU code (the tuning cache's
# GPU test, the SwiGLU tests after the review commit), the engine's GPU tests, then the SwiGLU
# modes A/B on one shared tuning cache (tools/gpu/tune_swiglu.sh's plan) and where the batch-1
# step goes, each part dropped on its own, with that cache.
#   bash results/2026-12-02-tune/run1.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test tune_cache_gpu build/gpu/tests/engine/test_tune_cache_gpu 200
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 200
ab_test swiglu_fuse build/gpu/tests/engine/test_swiglu_fuse_gpu 200
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_test attn_fused build/gpu/tests/engine/test_attn_fused_gpu 200
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 200
ab_pack
PATS=dense,2:4,4:8,8:16,16:32
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
ab_decode fill "$NEW_BIN" llama-3.1-8b $PATS 1,2,4,16
for k in 1 2; do
    for m in 0 1 2; do
        SD_SWIGLU_FUSE=$m ab_decode sw$m-$k "$NEW_BIN" llama-3.1-8b $PATS 1,2,4,16
    done
    ab_pack
done
for k in 1 2; do
    for skip in none norm attn qkvpost small; do
        if [ $skip = none ]; then
            ab_decode skip-$skip-$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1
        else
            SD_BENCH_SKIP=$skip ab_decode skip-$skip-$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1
        fi
    done
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
