#!/usr/bin/env bash
# Eighth session, sixth GPU call. run5 found the cause of run4's batch-64 slowdown: the autotuner
# took every rows_per_warp above 100 for a compacting-kernel config, so it skipped the wide kernel
# (128) and cached "nothing timed", leaving the launch to the heuristic's split. Fixed (and
# the autotuner now fails loudly when no candidate was timed). Here: the GPU tests, the tree before
# this session (edc5eeb) against the fixed one at batches 1-64, then the numbers of record again.
#   OLD=results/tmp/snapold bash results/2026-12-01-c24/run6.sh    (.debs and results/tmp/snapold carried)
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_pack
ab_decode old1 "$OLD_BIN" llama-3.1-8b dense,2:4 1,4,16,64
ab_decode new1 "$NEW_BIN" llama-3.1-8b dense,2:4 1,4,16,64
ab_pack
ab_decode 8b "$NEW_BIN" llama-3.1-8b all 1,4,16,64
ab_pack
ab_decode q14 "$NEW_BIN" qwen3-14b dense,2:4,8:16,16:32 1,16
ab_decode q32 "$NEW_BIN" qwen3-32b dense,2:4,8:16,16:32 1,16
ab_pack
ab_decode l70 "$NEW_BIN" llama-3.3-70b 2:4 1,16,64
ab_pack
ab_kernels full "$NEW_BIN" --reps 30
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
