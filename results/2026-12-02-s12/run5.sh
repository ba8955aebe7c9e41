#!/usr/bin/env bash
# results/2026-12-02-s12/run5.sh: the autotuner's stream-K policy as committed (SD_NM_SK default:
# only where the register-expanding kernels do not take the problem) against SD_NM_SK=2 (the
# policy before), 8B 8:16 and 16:32 at batch 1, 4, 16, fresh caches; and the kernel tests.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s12/run5.sh
source tools/gpu_ab.sh
ab_build
ab_test tune_cache_gpu build/gpu/tests/engine/test_tune_cache_gpu 100
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 150
ab_pack
P=8:16,16:32
for s in 1 2; do
    SD_NM_SK=$s AB_DECODE_ARGS="--tune-cache $R/tune-sk$s.json" ab_decode fill-sk$s "$NEW_BIN" llama-3.1-8b $P 1,4,16
done
for k in 1 2; do
    for s in 1 2; do
        SD_NM_SK=$s AB_DECODE_ARGS="--tune-cache $R/tune-sk$s.json" ab_decode sk$s-$k "$NEW_BIN" llama-3.1-8b $P 1,4,16
    done
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
