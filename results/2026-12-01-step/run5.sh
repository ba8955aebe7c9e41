#!/usr/bin/env bash
# Seventh session, fifth GPU call: the tree as committed (RMSNorm and attention prefetch kept, the
# cluster merge dropped): its attention GPU tests and the numbers of record (8B every pattern
# and batch, Qwen3-14B/32B, Llama-3.3-70B). From the repo root, .debs carried.
#   bash results/2026-12-01-step/run5.sh
source tools/gpu_ab.sh
ab_build
for t in engine/test_attn_fused_gpu engine/test_cuda_backend engine/test_cuda_sample; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 200
done
ab_pack
ab_decode 8b "$NEW_BIN" llama-3.1-8b all 1,4,16,64
ab_pack
ab_decode q14 "$NEW_BIN" qwen3-14b dense,2:4,8:16,16:32 1,16
ab_decode q32 "$NEW_BIN" qwen3-32b dense,2:4,8:16,16:32 1,16
ab_decode l70 "$NEW_BIN" llama-3.3-70b 2:4,4:8 1,16,64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
