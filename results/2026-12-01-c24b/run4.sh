#!/usr/bin/env bash
# Ninth session, fourth GPU call: the engine's autotuner times each candidate config over the same
# linear of several layers (SD_TUNE_ROTATE, on by default), so that small linears are timed with
# their weights coming from DRAM as in the step, not from L2 (the 8B qkv / o fit in L2 at 2:4).
# Decode with it off and on, alternated twice, the tuning log on the second round.
#   bash results/2026-12-01-c24b/run4.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
for k in 1 2; do
    [ $k = 2 ] && export SD_TUNE_LOG=1
    SD_TUNE_ROTATE=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,2,4,16
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,2,4,16
    ab_pack
done
unset SD_TUNE_LOG
SD_TUNE_ROTATE=0 ab_decode q14off "$NEW_BIN" qwen3-14b dense,2:4 1,4
ab_decode q14on "$NEW_BIN" qwen3-14b dense,2:4 1,4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
