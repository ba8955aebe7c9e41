#!/usr/bin/env bash
# results/2026-12-02-s12/run2.sh: the early K/V tile at head groups too (batch 4 of the 8B, where
# the grid fits two blocks per SM), the engine's GPU tests with it on by default, and the decode
# tables of record. Binaries built here (make BUILD=build/gpu: sparsed, test_attn_fused_gpu,
# test_cuda_backend, test_sched_cuda), stripped, packed into results/tmp/bins.tar.xz; on the
# device, with carry [".debs", "results/tmp/bins.tar.xz"]:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s12/run2.sh
source tools/gpu_ab.sh
ab_build
ab_test attn_fused build/gpu/tests/engine/test_attn_fused_gpu 200
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 200
ab_pack
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
ALL=dense,2:4,4:8,8:16,16:32
ab_decode fill "$NEW_BIN" llama-3.1-8b $ALL 1,2,4,8,16,64
for k in 1 2 3; do
    for e in 0 1; do
        SD_ATTN_EARLY=$e ab_decode attn$e-$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,2,4,8,16
    done
    ab_pack
done
ab_records "$NEW_BIN"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
