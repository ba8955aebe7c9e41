#!/usr/bin/env bash
# results/2026-12-02-s14/run2.sh (tree 7bad867): (1) each kernel of the batch-1 decode step alone:
# Nsight Compute's duration of ~40 consecutive kernels of the 8B decode graph (dense, 2:4, 8:16;
# clocks and caches left alone), and the fused attention kernel's sections; (2) the attention's
# knobs at batch 1 (SD_ATTN_CHUNK 32 / 128, SD_ATTN_CLUSTER=0, SD_ATTN_EARLY=0) against the
# default, 2:4, alternated twice on r1's tuning.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s14/run2.sh
source tools/gpu_ab.sh
ab_build
T=results/2026-12-02-s14/r1
for pat in dense 2:4 8:16; do
    tc=$T/tune-${pat/:/-}.json
    timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --launch-skip 6000 --launch-count 40 "$NEW_BIN" bench decode --preset config/presets/llama-3.1-8b.json \
        --pattern $pat --batch 1 --ctx 512 --tune-cache "$tc" --out /tmp/x.md >"$R/ncu-dur-${pat/:/-}.txt" 2>&1
    ab_note "ncu durations $pat rc=$? $(ab_el) s"
    ab_pack
done
timeout 200 ncu --clock-control none --cache-control none --kernel-name regex:"attn_decode" --launch-skip 300 \
    --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters "$NEW_BIN" bench decode \
    --preset config/presets/llama-3.1-8b.json --pattern 2:4 --batch 1 --ctx 512 --tune-cache $T/tune-2-4.json \
    --out /tmp/x.md >"$R/ncu-attn.txt" 2>&1
ab_note "ncu attn rc=$? $(ab_el) s"
ab_pack
for k in 1 2; do
    tc="--tune-cache $T/tune-2-4.json"
    AB_DECODE_ARGS="$tc" ab_decode base-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    SD_ATTN_CHUNK=32 AB_DECODE_ARGS="$tc" ab_decode chunk32-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    SD_ATTN_CHUNK=128 AB_DECODE_ARGS="$tc" ab_decode chunk128-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    SD_ATTN_CLUSTER=0 AB_DECODE_ARGS="$tc" ab_decode nocl-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    SD_ATTN_EARLY=0 AB_DECODE_ARGS="$tc" ab_decode noearly-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    ab_pack
done
