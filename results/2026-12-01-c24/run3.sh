#!/usr/bin/env bash
# Eighth session, third GPU call: the compacting 2:4 kernel in its final configs (101: 1 row per
# warp, 102: 2 rows, 103: 1 row with registers capped for 4 blocks per SM; the default at B = 1).
# GPU tests (kernels and the engine paths that decode pruned models), memcheck, 8B decode with
# SD_NM_C24=0/1 alternated, then the numbers of record: 8B every pattern and batch, the full
# kernel table, Qwen3-14B/32B, Llama-3.3-70B 2:4.
#   bash results/2026-12-01-c24/run3.sh     (repo root, .debs carried; output in $OUT/r.tgz)
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu engine/test_cuda_backend engine/test_sched_cuda prune/test_prune_cuda \
    prune/test_capture_cuda; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 200
done
P=build/gpu/tools/prof_spmv
for rw in 101 102 103; do
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $P 2:4 1000 4096 1 $rw 3 4 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck c24 rw=$rw rc=$?"
done
ab_pack
for k in 1 2; do
    SD_NM_C24=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4 1
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,2:4 1
done
ab_decode 8b "$NEW_BIN" llama-3.1-8b all 1,4,16,64
ab_pack
ab_kernels full "$NEW_BIN" --reps 30
ab_pack
ab_decode q14 "$NEW_BIN" qwen3-14b dense,2:4,8:16,16:32 1,16
ab_decode q32 "$NEW_BIN" qwen3-32b dense,2:4,8:16,16:32 1,16
ab_pack
ab_decode l70 "$NEW_BIN" llama-3.3-70b 2:4 1,16,64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
