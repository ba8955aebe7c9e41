#!/usr/bin/env bash
# Ninth session, fifth GPU call: 8:16 through the register-expanding tensor-core kernels
# (kernels/nm_tcx.h sd_tcx816_expand: the group's 128 bits as a queue of funnel shifts), the
# 16-row one for B <= 16 and the wide one up to 64. GPU tests (tcx 8:16 at every config, the
# fallbacks, bad arguments), memcheck of both kernels, decode 8:16 with SD_NM_TCX=0 (the tree
# before: no such kernel for 8:16) and on, alternated twice, Qwen3-14B 8:16, the full kernel table.
#   bash results/2026-12-01-c24b/run5.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
for cfg in "8 24 1" "8 24 3" "40 128 1" "64 128 2"; do
    set -- $cfg
    timeout 60 compute-sanitizer --tool memcheck build/gpu/tools/prof_spmv 8:16 1000 4224 $1 $2 $3 3 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck 8:16 B=$1 rw=$2 split=$3 rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
done
ab_pack
for k in 1 2; do
    SD_NM_TCX=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,8:16 1,4,16,64
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,8:16 1,4,16,64
    ab_pack
done
ab_decode q14 "$NEW_BIN" qwen3-14b dense,8:16 1,16
ab_pack
ab_kernels full "$NEW_BIN" --reps 30
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
