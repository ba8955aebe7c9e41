#!/usr/bin/env bash
# Last GPU call of 2026-12-01 (one H200): the numbers of record at the session's final tree —
# the GPU tests, the decode tables (8B every pattern at B = 1, 4, 16, 64, with the 2:4 batched rows
# also without the tcx kernels for the side-by-side ratio; Qwen3-14B/32B; Llama-3.3-70B 2:4 on one
# GPU), the full kernel table, and the memory check of the tcx kernels.
#   bash results/2026-12-01-final/run.sh     (repo root, .debs carried; output in $OUT/r.tgz)
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu engine/test_cuda_backend engine/test_sched_cuda engine/test_cuda_sample \
    engine/test_attn_fused_gpu engine/test_attn_prefill_gpu prune/test_prune_cuda prune/test_capture_cuda; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 200
done
ab_pack
ab_decode 8b "$NEW_BIN" llama-3.1-8b all 1,4,16,64
SD_NM_TCX=0 ab_decode 8b-notcx "$NEW_BIN" llama-3.1-8b 2:4,4:8 4,16,64
ab_pack
ab_kernels full "$NEW_BIN" --reps 30
ab_pack
ab_decode q14 "$NEW_BIN" qwen3-14b dense,2:4,8:16,16:32 1,16
ab_decode q32 "$NEW_BIN" qwen3-32b dense,2:4,8:16,16:32 1,16
ab_decode l70 "$NEW_BIN" llama-3.3-70b 2:4,4:8 1,16,64
ab_pack
SD_TEST_ONLY=tcx timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
    build/gpu/tests/kernels/test_spmv_gpu >"$R/memcheck-tcx.log" 2>&1
ab_note "memcheck tcx rc=$? $(ab_el) s: $(tail -1 "$R/memcheck-tcx.log")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
