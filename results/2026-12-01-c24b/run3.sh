#!/usr/bin/env bash
# Ninth session, third GPU call: the numbers of record at the committed tree (the compacting
# kernel for one and two vectors, no qkv split), and the decode attention's minimum keys per
# split (SD_ATTN_CHUNK, 64 by default) at batch 1, 32 to 512, beside the default in one run.
#   bash results/2026-12-01-c24b/run3.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_decode 8b "$NEW_BIN" llama-3.1-8b all 1,2,4,16,64
ab_pack
for c in 64 32 128 512 64b; do
    SD_ATTN_CHUNK=${c%b} ab_decode chunk$c "$NEW_BIN" llama-3.1-8b dense,2:4 1
done
ab_pack
ab_decode q14 "$NEW_BIN" qwen3-14b dense,2:4,8:16,16:32 1,16
ab_decode q32 "$NEW_BIN" qwen3-32b dense,2:4,8:16,16:32 1,16
ab_pack
ab_decode l70 "$NEW_BIN" llama-3.3-70b 2:4 1,16,64
ab_pack
ab_kernels full "$NEW_BIN" --reps 30
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
