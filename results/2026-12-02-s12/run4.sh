#!/usr/bin/env bash
# results/2026-12-02-s12/run4.sh: does the stream-K row-per-lane kernel (rows_per_warp 64) cost
# the decode step where the autotuner picks it? r3's records had it on the 8B's 8:16 gate_up at
# batch 4 (5.39 ms against 4.65 with the register-expanding kernel in r2). SD_NM_SK=0 drops it
# from the candidates. Two caches tuned from scratch per side (the tuning itself moves a step
# 1-3%, r3), each decoded twice, alternated. Binary built here, carried packed:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s12/run4.sh
source tools/gpu_ab.sh
ab_build
P=2:4,4:8,8:16,16:32
for s in 1 0; do
    for c in a b; do
        SD_NM_SK=$s AB_DECODE_ARGS="--tune-cache $R/tune-sk$s$c.json" ab_decode fill-sk$s$c "$NEW_BIN" \
            llama-3.1-8b $P 1,2,4,8,16
    done
done
ab_pack
for k in 1 2; do
    for s in 1 0; do
        for c in a b; do
            SD_NM_SK=$s AB_DECODE_ARGS="--tune-cache $R/tune-sk$s$c.json" ab_decode sk$s$c-$k "$NEW_BIN" \
                llama-3.1-8b $P 1,2,4,8,16
        done
    done
    ab_pack
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
