#!/usr/bin/env bash
# results/2026-12-02-s13/run6.sh: the tree with the 32-bit 4:8 selector table as the default and
# the refine pass (off by default): GPU tests, memcheck; then why r5's refine runs decoded 8:16 and
# 16:32 ~3% slower although the refine pass timed their graphs faster: patterns in reverse order
# (16:32 first), plain against refine, alternated twice, with the GPU's clocks, power and
# temperature sampled every 100 ms (clocks.csv); then the 8B records again (4:8 with the table).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run6.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test tune_cache_gpu build/gpu/tests/engine/test_tune_cache_gpu 300
for c in "4:8 1000 4224 1 101 2" "4:8 1000 4224 1 102 1" "4:8 1000 4224 1 103 1"; do
    timeout 60 compute-sanitizer --tool memcheck build/gpu/tools/prof_spmv $c 3 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck $c rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
done
ab_pack
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 100 >"$R/clocks.csv" 2>&1 &
SMI=$!
for k in 1 2; do
    ab_note "plain-$k start $(date +%T.%N)"
    ab_decode plain-$k "$NEW_BIN" llama-3.1-8b 16:32,8:16,4:8,2:4,dense 1
    ab_note "refine-$k start $(date +%T.%N)"
    SD_TUNE_REFINE=1 SD_TUNE_LOG=1 ab_decode refine-$k "$NEW_BIN" llama-3.1-8b 16:32,8:16,4:8,2:4,dense 1
    ab_pack
done
kill $SMI
grep "^refine:" "$R/decode.log" >"$R/refine.txt"
ab_decode rec-8b "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4,16,64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
