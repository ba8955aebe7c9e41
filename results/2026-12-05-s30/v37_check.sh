#!/usr/bin/env bash
# tools/gpu/v37_check.sh: the gather kernel with a capped K-tile (rows_per_warp 5,
# SD_NM_RW_GATHER_KT; kernels/NOTES.md v36-v37), written without a GPU, checked and timed in one call:
#   1. test_spmv_gpu (test_gpu_kt_cap: every pattern on rows of 448 / 288 words against the CPU,
#      and the autotuner with the candidate on);
#   2. prof_spmv on the 8B down projection (4096 x 14336) and gate_up at batch 1: rows_per_warp 5
#      beside 1, 2 and the compacting 102 for every pattern;
#   3. A/B alternated twice: 8B decode at batch 1 and 2 of 8:16 and 16:32 (and 4:8) with
#      SD_NM_KT_CAP=1 (the candidate timed at first use) against the default.
# Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/kernels/test_spmv_gpu build/gpu/tools/prof_spmv
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/v37_check.sh
# (carry .debs, results/tmp). Results in $R (tools/gpu_ab.sh).
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_bench
P8=config/presets/llama-3.1-8b.json
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-300} AB_BENCH_MIN=25 AB_BENCH_TIMEOUT=60
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_pack
P=build/gpu/tools/prof_spmv
for shape in "4096 14336" "28672 4096"; do
    for pat in 2:4 4:8 8:16 16:32; do
        for cfg in "1 1" "2 1" "5 1" "102 1"; do
            $P $pat $shape 1 $cfg 200 >>"$R/prof_time.txt" 2>&1
        done
    done
done
ab_note "prof_spmv timings $(ab_el) s"
ab_pack
for round in 1 2; do
    ab_bench default-$round decode SD_X=1 -- --pattern 4:8,8:16,16:32 --batch 1,2
    ab_bench ktcap-$round decode SD_NM_KT_CAP=1 -- --pattern 4:8,8:16,16:32 --batch 1,2
done
