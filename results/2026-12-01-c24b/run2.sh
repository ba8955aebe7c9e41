#!/usr/bin/env bash
# Ninth session, second GPU call. (1) The qkv projection adds into an output its RMSNorm zeroed
# (SD_QKV_ACC, on by default), so its kernels may split K without a memset node; decode with it
# off and on, alternated twice, SD_TUNE_LOG=1 on the last to log the configs chosen. (2) The
# c24 batch kernel kept for B = 2 only (run1: never picked at 3 and 4). GPU tests, then the 8B
# decode table of record.
#   bash results/2026-12-01-c24b/run2.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 200
ab_test capture_cuda build/gpu/tests/prune/test_capture_cuda 200
ab_test prune_cuda build/gpu/tests/prune/test_prune_cuda 300
ab_pack
for k in 1 2; do
    SD_QKV_ACC=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,2,4,16
    [ $k = 2 ] && export SD_TUNE_LOG=1
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,2,4,16
    unset SD_TUNE_LOG
done
ab_pack
ab_decode 8b "$NEW_BIN" llama-3.1-8b all 1,2,4,16,64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
