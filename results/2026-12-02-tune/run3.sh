#!/usr/bin/env bash
# Eleventh session, third GPU call: the L2 prefetch dropped (run2: slower), the cluster merge of
# the decode attention's splits as a policy (SD_ATTN_CLUSTER 0 never / 1 at most 4 tokens, the
# default / 2 always) A/B'd at batch 1-16, alternated twice on one tuning cache; the attention
# and engine GPU tests; then the decode tables of record (the protocol: context 512,
# batches 1, 4, 16, 64) for Llama-3.1-8B, Qwen3-14B, Qwen3-32B, and Llama-3.3-70B 2:4; the
# kernel and SwiGLU GPU tests last.
#   bash results/2026-12-02-tune/run3.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test attn_fused build/gpu/tests/engine/test_attn_fused_gpu 200
ab_test attn_prefill build/gpu/tests/engine/test_attn_prefill_gpu 200
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 200
ab_pack
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
ALL=dense,2:4,4:8,8:16,16:32
ab_decode fill "$NEW_BIN" llama-3.1-8b $ALL 1,2,4,8,16,64
for k in 1 2; do
    for m in 0 1 2; do
        SD_ATTN_CLUSTER=$m ab_decode cl$m-$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,2,4,8,16
    done
    ab_pack
done
ab_decode rec-8b "$NEW_BIN" llama-3.1-8b $ALL 1,4,16,64
ab_pack
ab_decode rec-q14 "$NEW_BIN" qwen3-14b $ALL 1,4,16,64 512 240
ab_pack
ab_decode rec-q32 "$NEW_BIN" qwen3-32b $ALL 1,4,16,64 512 240
ab_pack
ab_decode rec-70b "$NEW_BIN" llama-3.3-70b 2:4 1,4,16 512 200
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 120
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 60
ab_test tune_cache_gpu build/gpu/tests/engine/test_tune_cache_gpu 60
ab_test swiglu_fuse build/gpu/tests/engine/test_swiglu_fuse_gpu 60
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
