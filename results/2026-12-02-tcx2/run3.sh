#!/usr/bin/env bash
# Tenth session, third GPU call: the MLP's SwiGLU in the gate_up kernel's epilogue (gate and up
# rows of a pair in one block; the word-per-lane kernels at 1-2 vectors, the 16-row tensor-core
# kernels up to 16; sd__cu_linear_swiglu). GPU tests (the epilogue against the fp32 path and the
# fp64 reference, refusals, the backend's logits bit for bit with it off / on, eager and graph),
# memcheck of the kernel test, decode 8B every pattern at B = 1, 2, 4, 16 with SD_SWIGLU_FUSE=0
# (the tree before) and on, alternated twice; where a batch-1 step goes now (SD_BENCH_SKIP).
#   bash results/2026-12-02-tcx2/run3.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
ab_test swiglu_fuse build/gpu/tests/engine/test_swiglu_fuse_gpu 300
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 300
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 300
ab_test capture_cuda build/gpu/tests/prune/test_capture_cuda 300
timeout 300 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_swiglu_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck swiglu_gpu rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean, $(tail -1 "$R/memcheck.log")"
ab_pack
for k in 1 2; do
    SD_SWIGLU_FUSE=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,2,4,16
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,2,4,16
    ab_pack
done
for skip in "" attn norm swiglu small; do
    n=${skip:-none}
    SD_BENCH_SKIP=$skip ab_decode skip-$n "$NEW_BIN" llama-3.1-8b dense,2:4 1
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
