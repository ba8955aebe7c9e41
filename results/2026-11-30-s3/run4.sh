#!/usr/bin/env bash
# Third session, a last short GPU call: the decode attention's two knobs at batch 1 and 16,
# synthetic Llama-3.1-8B dense, context 512 and 4096: keys per split at least SD_ATTN_CHUNK
# (32, 64) and query heads per block capped by SD_ATTN_GROUP (1, or the GQA group: 4).
#   bash results/2026-11-30-s3/run4.sh     (repo root, .debs carried)
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/r
mkdir -p "$R"
source tools/device_env.sh
B=build/gpu
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
make -j16 BUILD=$B all >"$R/build.log" 2>&1
echo "build rc=$? $(el) s" | tee -a "$R/summary.txt"
P=config/presets/llama-3.1-8b.json
for ctx in 512 4096; do
    for v in "64 8" "32 8" "64 1" "32 1"; do
        set -- $v
        n=ctx$ctx-chunk$1-group$2
        SD_ATTN_CHUNK=$1 SD_ATTN_GROUP=$2 timeout 60 $B/sparsed bench decode --preset $P --pattern dense \
            --batch 1,16 --ctx $ctx --out "$R/$n.md" >>"$R/decode.log" 2>&1
        echo "$n rc=$? $(el) s" >>"$R/summary.txt"
        grep -E '^\| dense ' "$R/$n.md" | sed "s/^/$n /" >>"$R/summary.txt"
    done
done
cat "$R/summary.txt"
