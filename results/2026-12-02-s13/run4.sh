#!/usr/bin/env bash
# results/2026-12-02-s13/run4.sh: the committed tree (e745f60: 4:8 compaction at batch 1 only):
# the SpMV and CUDA backend GPU tests, the compacting kernels' memcheck, then the decode tables of
# record (tools/gpu_ab.sh ab_records: 8B, Qwen3-14B / 32B every pattern at batch 1, 4, 16, 64;
# 70B 2:4), each from a fresh tuning.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run4.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
for c in "4:8 1000 4224 1 101 2" "4:8 1000 4224 1 103 1"; do
    timeout 60 compute-sanitizer --tool memcheck build/gpu/tools/prof_spmv $c 3 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck $c rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
done
ab_pack
ab_records "$NEW_BIN"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
