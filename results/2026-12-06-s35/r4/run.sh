#!/usr/bin/env bash
# results/2026-12-06-s35/r4/run.sh: r2-r3 changed the down projection's split-K along with the
# signals, so they measured both at once. Here SD_DOWN_SLICES=9 keeps the split the tuner chose
# (each of its K slices waits on its columns' counters; down-slices.patch plus that mode): 8B
# decode, dense and 2:4, batch 1, one tuning cache, against no signals, alternated four times;
# then batch 2 twice.
# Binary prebuilt here, packed into results/tmp/bins.tar.xz; on the device (carry .debs,
# results/tmp): bash results/2026-12-06-s35/r4/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_have
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-400}
P8=config/presets/llama-3.1-8b.json
prebuilt_start

# dec NAME BATCH ENV...: bench decode dense,2:4 on the shared tuning cache
dec() {
    local name=$1 batch=$2
    shift 2
    ab_have 25 "decode $name" || return 0
    env "$@" timeout 90 build/gpu/sparsed bench decode --preset "$P8" --pattern dense,2:4 --batch "$batch" \
        --tune-cache "$R/tune.json" --out "$R/decode-$name.md" >/dev/null 2>"$R/decode-$name.err"
    ab_note "decode $name rc=$? $(ab_el) s"
    grep -E '^\| (dense|[0-9]+:[0-9]+) ' "$R/decode-$name.md" | sed "s/^/$name /" >>"$R/summary.txt"
}
dec tune-0 1,2 SD_X=1
for k in 1 2 3 4; do
    dec base-$k 1 SD_DOWN_SLICES=0
    dec st-$k 1 SD_DOWN_SLICES=9
done
for k in 5 6; do
    dec base-$k 2 SD_DOWN_SLICES=0
    dec st-$k 2 SD_DOWN_SLICES=9
done
python3 - "$R/tune.json" <<'PY' >>"$R/summary.txt"
import json, sys
for e in json.load(open(sys.argv[1]))["kernels"]:
    if e["rows"] == 4096 and e["cols"] == 14336:
        print("tuned down:", "dense" if e["dense"] else f'{e["n"]}:{e["m"]}', "B", e["B"], "rw", e["rows_per_warp"], "split", e["split"])
PY
python3 tools/ab_summary.py "$R" --base base >"$R/ab.txt" 2>&1
ab_pack
cp "$R"/ab.txt "$R"/summary.txt "$R"/gpu.txt "$OUT"/ 2>/dev/null
cat "$R/summary.txt" "$R/ab.txt"
