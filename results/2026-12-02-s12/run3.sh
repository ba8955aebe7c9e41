#!/usr/bin/env bash
# results/2026-12-02-s12/run3.sh: the decode tables of record with the committed tree (the early
# K/V tile at one head per block only; run2's records ran it at head groups too, 7% slower at
# batch 4), and how much of a pattern's batch-1 decode the autotuner's picks decide: two caches
# tuned from scratch, decoded alternately. Binary built here (make BUILD=build/gpu sparsed),
# stripped, packed; on the device, carry [".debs", "results/tmp/bins.tar.xz"]:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s12/run3.sh
source tools/gpu_ab.sh
ab_build
ALL=dense,2:4,4:8,8:16,16:32
AB_DECODE_ARGS="--tune-cache $R/tuneA.json" ab_decode tuneA "$NEW_BIN" llama-3.1-8b $ALL 1
AB_DECODE_ARGS="--tune-cache $R/tuneB.json" ab_decode tuneB "$NEW_BIN" llama-3.1-8b $ALL 1
for k in 1 2; do
    for c in A B; do
        AB_DECODE_ARGS="--tune-cache $R/tune$c.json" ab_decode cache$c-$k "$NEW_BIN" llama-3.1-8b $ALL 1
    done
done
ab_pack
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
ab_records "$NEW_BIN"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
