#!/usr/bin/env bash
# results/2026-12-02-s13/run7.sh: the refine pass with one pattern per process (r5 and r6 ran five
# patterns in one bench process, and the patterns run last lost with refine in either order):
# 8B batch 1, dense, 2:4, 4:8, 16:32, plain and SD_TUNE_REFINE=1 alternated three times, each
# process tuning afresh.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run7.sh
source tools/gpu_ab.sh
ab_build
for k in 1 2 3; do
    for pat in dense 2:4 4:8 16:32; do
        ab_decode plain-$k "$NEW_BIN" llama-3.1-8b $pat 1
        SD_TUNE_REFINE=1 SD_TUNE_LOG=1 ab_decode refine-$k "$NEW_BIN" llama-3.1-8b $pat 1
    done
    ab_pack
done
grep "^refine:" "$R/decode.log" >"$R/refine.txt"
ab_pack
