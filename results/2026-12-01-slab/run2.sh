#!/usr/bin/env bash
# Seventh session, second GPU call: the batch-1 kernel that copies all its weights into shared
# memory at launch (kernels/nm_spmv_slab.cu, rows_per_warp 8): its GPU test, the engine with it
# forced, bench kernels (8B shapes, 2:4 and 16:32) without it / forced, and bench decode at
# batch 1 with SD_NM_SLAB=0 / default (autotuner candidate) / force, alternated. From the repo
# root, .debs carried; results as $OUT/r.tgz.
#   bash results/2026-12-01-slab/run2.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv-gpu build/gpu/tests/kernels/test_spmv_gpu 200
SD_NM_SLAB=force ab_test cuda-backend-slab build/gpu/tests/engine/test_cuda_backend 200
ab_pack
ab_kernels slaboff "$NEW_BIN" --quick --slab off
ab_kernels slabforce "$NEW_BIN" --quick --slab force
ab_pack
for k in 1 2; do
    SD_NM_SLAB=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4,16:32 1
    SD_TUNE_LOG=1 ab_decode auto$k "$NEW_BIN" llama-3.1-8b dense,2:4,16:32 1
    SD_NM_SLAB=force ab_decode force$k "$NEW_BIN" llama-3.1-8b dense,2:4,16:32 1
    ab_pack
done
SD_NM_SLAB=0 ab_decode q14off "$NEW_BIN" qwen3-14b dense,2:4 1
SD_NM_SLAB=force ab_decode q14force "$NEW_BIN" qwen3-14b dense,2:4 1
ab_pack
