#!/usr/bin/env bash
# Seventh session, fourth GPU call: the step changes (vectorised RMSNorm with w before the PDL
# wait; the fused decode attention's L2 prefetch of its first K/V tile before the wait; the
# attention splits merged in a thread-block cluster through distributed shared memory) against
# the tree before them (53be18c, carried as results/tmp/snapold), alternated, and the cluster
# merge alone switched off (SD_ATTN_CLUSTER=0); the GPU tests, memcheck of the attention test;
# then the numbers of record (8B every pattern and batch, Qwen3-14B/32B, Llama-3.3-70B).
#   OLD=results/tmp/snapold bash results/2026-12-01-step/run4.sh    (.debs and results/tmp/snapold carried)
source tools/gpu_ab.sh
ab_build
for t in engine/test_cuda_backend engine/test_sched_cuda engine/test_cuda_sample engine/test_attn_fused_gpu \
    engine/test_attn_prefill_gpu prune/test_prune_cuda prune/test_capture_cuda; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 200
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 build/gpu/tests/engine/test_attn_fused_gpu \
    >"$R/memcheck-attn.log" 2>&1
ab_note "memcheck attn rc=$? $(ab_el) s: $(tail -1 "$R/memcheck-attn.log")"
ab_pack
for k in 1 2 3; do
    ab_decode old$k "$OLD_BIN" llama-3.1-8b dense,2:4 1,16
    ab_decode new$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
    SD_ATTN_CLUSTER=0 ab_decode nocl$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
done
ab_pack
ab_decode 8b "$NEW_BIN" llama-3.1-8b all 1,4,16,64
ab_pack
ab_decode q14 "$NEW_BIN" qwen3-14b dense,2:4,8:16,16:32 1,16
ab_decode q32 "$NEW_BIN" qwen3-32b dense,2:4,8:16,16:32 1,16
ab_decode l70 "$NEW_BIN" llama-3.3-70b 2:4,4:8 1,16,64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
