#!/usr/bin/env bash
# results/2026-12-06-s35/r3/run.sh: r2's down-projection slices again, with test_down_slices_gpu's
# bounds fixed (the refine pass off; rel L2 1e-2 a step): the two new tests, then 8B decode on
# one tuning cache, dense and 2:4: SD_DOWN_SLICES 0 / 1 / 2 / 3 at batch 1, alternated three times
# (1: one slice, i.e. down waits for every gate_up block's count rather than the grid's end), and 0
# against 2 at batch 2, 4, 8 and 16, alternated twice.
# Binaries prebuilt here (make BUILD=build/gpu ...), packed into results/tmp/bins.tar.xz; on the
# device (carry .debs, results/tmp): bash results/2026-12-06-s35/r3/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_have
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-540}
P8=config/presets/llama-3.1-8b.json
prebuilt_start
ab_test sig_gpu build/gpu/tests/kernels/test_sig_gpu 120
ab_test down_slices_gpu build/gpu/tests/engine/test_down_slices_gpu 120
grep -h "down launches waited" "$R"/test-down_slices_gpu.log >>"$R/summary.txt"

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
dec tune-0 1,2,4,8,16 SD_X=1
for k in 1 2 3; do
    dec base-$k 1 SD_DOWN_SLICES=0
    dec s1-$k 1 SD_DOWN_SLICES=1
    dec s2-$k 1 SD_DOWN_SLICES=2
    dec s3-$k 1 SD_DOWN_SLICES=3
done
for k in 4 5; do
    dec base-$k 2,4,8,16 SD_DOWN_SLICES=0
    dec s2-$k 2,4,8,16 SD_DOWN_SLICES=2
done
python3 tools/ab_summary.py "$R" --base base >"$R/ab.txt" 2>&1
ab_pack
cp "$R"/ab.txt "$R"/summary.txt "$R"/gpu.txt "$OUT"/ 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$R" . 2>/dev/null
cat "$R/summary.txt" "$R/ab.txt"
