#!/usr/bin/env bash
# Eleventh session, second GPU call: the decode attention's splits merged in a thread-block
# cluster (SD_ATTN_CLUSTER) and the o projection's weights prefetched into L2 during the
# attention (SD_ATTN_PREFETCH, MB), each alone and together, alternated twice, on one tuning
# cache; the attention tests (the cluster merge against the global one, bit for bit), the
# engine's GPU tests, memcheck of the fused attention test.
#   bash results/2026-12-02-tune/run2.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test attn_fused build/gpu/tests/engine/test_attn_fused_gpu 200
ab_test attn_prefill build/gpu/tests/engine/test_attn_prefill_gpu 200
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_test swiglu_fuse build/gpu/tests/engine/test_swiglu_fuse_gpu 200
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 200
ab_pack
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
PATS=dense,2:4,8:16
ab_decode fill "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4,16
for k in 1 2; do
    SD_ATTN_CLUSTER=0 SD_ATTN_PREFETCH=0 ab_decode base-$k "$NEW_BIN" llama-3.1-8b $PATS 1,4,16
    SD_ATTN_PREFETCH=0 ab_decode cl-$k "$NEW_BIN" llama-3.1-8b $PATS 1,4,16
    SD_ATTN_CLUSTER=0 ab_decode pf-$k "$NEW_BIN" llama-3.1-8b $PATS 1,4,16
    ab_decode both-$k "$NEW_BIN" llama-3.1-8b $PATS 1,4,16
    SD_ATTN_PREFETCH=16 ab_decode pf16-$k "$NEW_BIN" llama-3.1-8b $PATS 1
    ab_pack
done
ab_decode all "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4,16
SD_ATTN_CLUSTER=0 SD_ATTN_PREFETCH=0 ab_decode q32-base "$NEW_BIN" qwen3-32b dense,2:4 1
ab_decode q32-both "$NEW_BIN" qwen3-32b dense,2:4 1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
timeout 120 compute-sanitizer --tool memcheck build/gpu/tests/engine/test_attn_fused_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck attn_fused rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean, $(tail -1 "$R/memcheck.log")"
ab_pack
