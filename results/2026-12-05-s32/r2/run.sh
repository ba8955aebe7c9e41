#!/usr/bin/env bash
# results/2026-12-05-s32/r2/run.sh (was tools/gpu/s32_check2.sh): bench spec on the GPU with the notes on differing outputs (where an
# output with drafts parts from the one without, and the two best tokens' logprob gap there), for
# the lookup and the draft model; test_prefix with the carried libraries on the path; r1's prefix
# load again with the metrics that count each admitted request's lookup once (7f90cdc).
# Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_prefix
# then on the device (carry .debs, results/tmp): bash results/2026-12-05-s32/r2/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
AB_PREBUILT=1 prebuilt_start
ab_test test_prefix build/gpu/tests/engine/test_prefix 60
for args in "--tokens 4" "--tokens 4 --draft-model models/tiny"; do
    name=$(echo "$args" | tr -d ' -' | sed 's/tokens/k/;s/draftmodelmodels\/tiny/-draft/')
    timeout 150 build/gpu/sparsed bench spec --model models/tiny --backend cuda $args --gen 256 --rounds 3 \
        --out "$R/spec-$name.md" >/dev/null 2>"$R/spec-$name.err"
    ab_note "bench spec $args rc=$? $(ab_el) s"
    sed -n '/^| [a-z]/p;/^- /p' "$R/spec-$name.md" | grep -v 'workload\|^- date\|^- command' | sed "s/^/$name /" >>"$R/summary.txt"
    ab_pack
done
OUT=$OUT/prefix AB_WORK=/tmp/ab-prefix AB_PREBUILT=1 KV_BLOCKS=1000 NPRE=16 CACHES=true RATES=8,32 N=160 \
    timeout 250 bash tools/gpu/prefix_load.sh
ab_note "prefix_load rc=$?"
cat /tmp/ab-prefix/r/summary.txt >>"$R/summary.txt" 2>/dev/null
ab_pack
cat "$R/summary.txt"
