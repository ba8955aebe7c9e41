#!/usr/bin/env bash
# Ninth session, first GPU call: the 2:4 compacting kernel (nm_spmv_c24.cu) for batches of 2-4,
# one selector per nibble for every vector. The GPU tests, then the kernels at B = 1..4 on the
# 8B shapes with it off (--no-c24) and on, then decode at B = 2..4 with it off (SD_NM_C24=0) and
# on, alternated twice, then the engine's GPU tests.
#   bash results/2026-12-01-c24b/run1.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_pack
ab_kernels off "$NEW_BIN" --quick --batch 1,2,3,4 --no-c24
ab_kernels on "$NEW_BIN" --quick --batch 1,2,3,4
ab_pack
for k in 1 2; do
    SD_NM_C24=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4 2,3,4
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,2:4 2,3,4
done
ab_pack
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 200
for B in 2 4; do
    for cfg in "101 1" "101 2" "103 1" "103 2" "32 1" "24 1"; do
        for sh in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
            echo "B=$B cfg $cfg shape $sh: $(build/gpu/tools/prof_spmv 2:4 $sh $B $cfg 200 2>&1 | tail -1)"
        done
    done
done >"$R/prof.txt" 2>&1
ab_note "prof $(ab_el) s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
