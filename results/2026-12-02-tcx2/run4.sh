#!/usr/bin/env bash
# Tenth session, fourth GPU call: run3 again after its two bugs (the argument check asked y for
# all rows, so every fused launch was refused; the fused launch took the heuristic's config, not
# the one tuned for the plain launch). Tests, decode 8B with SD_SWIGLU_FUSE=0 / on alternated
# twice, SD_BENCH_SKIP at batch 1, memcheck of the kernel test last.
#   bash results/2026-12-02-tcx2/run4.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 200
ab_test swiglu_fuse build/gpu/tests/engine/test_swiglu_fuse_gpu 200
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_pack
for k in 1 2; do
    SD_SWIGLU_FUSE=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,2,4,16
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,2,4,16
    ab_pack
done
for skip in swiglu small; do
    SD_BENCH_SKIP=$skip ab_decode skip-$skip "$NEW_BIN" llama-3.1-8b dense,2:4 1
done
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 100
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
timeout 90 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_swiglu_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck swiglu_gpu rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean, $(tail -1 "$R/memcheck.log")"
ab_pack
