#!/usr/bin/env bash
# results/2026-12-02-s14/run1.sh (tree 7bad867): (1) GPU tests of the thirteenth session's review
# commit c10a690, which no GPU had run; (2) where the batch-1 step's time goes per pattern: 8B
# decode at batch 1 with SD_BENCH_SKIP dropping the norms, the attention, all small kernels, or
# the linears, for dense, 2:4 and 8:16, alternated twice, each pattern's runs on one tuning.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s14/run1.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test tune_cache_gpu build/gpu/tests/engine/test_tune_cache_gpu 300
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 300
ab_pack
for k in 1 2; do
    for pat in dense 2:4 8:16; do
        tc="$R/tune-${pat/:/-}.json"
        for skip in none norm attn small linears; do
            s=$skip
            [ "$s" = none ] && s=
            SD_BENCH_SKIP=$s AB_DECODE_ARGS="--tune-cache $tc" ab_decode "$skip-$k" "$NEW_BIN" llama-3.1-8b $pat 1
        done
    done
    ab_pack
done
