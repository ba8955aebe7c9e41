#!/usr/bin/env bash
# results/2026-12-02-s13/run5.sh: (1) GPU tests of the autotuner's runner-up and of the refine pass
# (SD_TUNE_REFINE: each bucket's first graph tries each linear's runner-up config inside the step);
# (2) the 4:8 compacting kernel with its selector table in the 32-bit form (LDS.32, two more
# permutes a byte; build/gpu32: -DSD_C48_TAB32) against the 8-byte form, same configs, alternated;
# (3) the refine pass in decode: its own log (each runner-up's step time against the best's, one
# process), then plain against refine, each from a fresh tuning, alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run5.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test tune_cache_gpu build/gpu/tests/engine/test_tune_cache_gpu 300
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 200
timeout 60 compute-sanitizer --tool memcheck build/gpu32/tools/prof_spmv 4:8 1000 4224 1 101 2 3 >"$R/memcheck32.log" 2>&1
ab_note "memcheck tab32 rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck32.log") clean"
ab_pack
for k in 1 2; do
    for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
        set -- $shape
        for rw in 101 102 103; do
            for v in gpu gpu32; do
                echo "$v $(build/$v/tools/prof_spmv 4:8 $1 $2 1 $rw 1 300 2>&1 | tail -1)" >>"$R/prof-tab.txt"
            done
        done
    done
done
ab_note "prof tab $(ab_el) s"
ab_pack
SD_TUNE_LOG=1 SD_TUNE_REFINE=1 ab_decode refinelog "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4
grep "^refine:" "$R/decode.log" >"$R/refine.txt"
ab_pack
for k in 1 2; do
    ab_decode plain-$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1
    SD_TUNE_REFINE=1 ab_decode refine-$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1
    ab_pack
done
