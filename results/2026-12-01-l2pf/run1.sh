#!/usr/bin/env bash
# Seventh session, first GPU call: (1) the checks tools/gpu_pending.sh waited for (the
# deterministic option: test_cuda_sample, test_deterministic, test_gpu_deterministic_no_split,
# and its cost in bench decode); (2) the L2 prefetch of the next linear's weights
# (engine/cuda_prefetch.cu, SD_L2PF=MB[,after]) against none, alternated, and test_cuda_backend
# with it on. From the repo root, .debs carried; results as $OUT/r.tgz.
#   bash results/2026-12-01-l2pf/run1.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv-gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_test cuda-backend build/gpu/tests/engine/test_cuda_backend 200
ab_test cuda-sample build/gpu/tests/engine/test_cuda_sample 200
SD_L2PF=32 ab_test cuda-backend-pf32 build/gpu/tests/engine/test_cuda_backend 200
ab_pack
for k in 1 2; do
    ab_decode base$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
    SD_L2PF=16 ab_decode pf16-$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
    SD_L2PF=32 ab_decode pf32-$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
    SD_L2PF=32,after ab_decode pf32after-$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
    SD_L2PF=64 ab_decode pf64-$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
    ab_pack
done
for k in 1 2; do
    ab_decode nodet$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16,64
    AB_DECODE_ARGS=--deterministic ab_decode det$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16,64
done
ab_pack
