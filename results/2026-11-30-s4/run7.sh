#!/usr/bin/env bash
# Fourth session, seventh GPU call (one H200): sliding-window attention (merged) on the GPU:
#   1. the windowed GPU tests (tiled + decode kernels vs fp64, fused vs two kernels, CUDA vs CPU
#      on a windowed tiny model) and the other CUDA backend tests;
#   2. no window must cost nothing: bench decode 8B dense,2:4 B=1,16 ctx 512, old (the commit
#      before the merge, ../.snapold) and new alternated;
#   3. the decode attention's split size on the final kernel: SD_ATTN_CHUNK=32 and 128 (default 64).
#   bash results/2026-11-30-s4/run7.sh     (in the new tree; .debs carried, old tree at ../.snapold)
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/r
mkdir -p "$R"
source tools/device_env.sh
B=build/gpu
OLD=${OLD:-../.snapold}
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
make -j16 BUILD=$B all >"$R/build.log" 2>&1 &
(cd "$OLD" && make -j16 BUILD=build/gpu all >"$R/build-old.log" 2>&1) &
wait
echo "build $(el) s: new $(test -x $B/sparsed && echo ok), old $(test -x $OLD/build/gpu/sparsed && echo ok)" |
    tee -a "$R/summary.txt"
grep -E "error" "$R/build.log" | head -20 >>"$R/summary.txt"
t() {
    timeout "$2" $B/tests/$1 >"$R/$(basename $1).log" 2>&1
    echo "$1 rc=$? $(tail -1 "$R/$(basename $1).log") $(el) s" | tee -a "$R/summary.txt"
    grep -E "FAIL|worst|cases" "$R/$(basename $1).log" | head -12 >>"$R/summary.txt"
}
t engine/test_attn_prefill_gpu 150
t engine/test_attn_fused_gpu 150
t engine/test_cuda_backend 150
t engine/test_sched_cuda 120
bench() { # name binary [env]
    env ${3:-X=1} timeout 100 $2 bench decode --preset config/presets/llama-3.1-8b.json --pattern dense,2:4 \
        --batch 1,16 --ctx 512 --out "$R/decode-$1.md" >>"$R/decode.log" 2>&1
    echo "decode $1 rc=$? $(el) s" | tee -a "$R/summary.txt"
    grep -E '^\| (dense|2:4) ' "$R/decode-$1.md" | sed "s/^/$1 /" >>"$R/summary.txt"
}
bench old $OLD/build/gpu/sparsed
bench new $B/sparsed
bench old2 $OLD/build/gpu/sparsed
bench new2 $B/sparsed
bench new-chunk32 $B/sparsed SD_ATTN_CHUNK=32
bench new-chunk128 $B/sparsed SD_ATTN_CHUNK=128
tar czf "$OUT/r.tgz" -C "$OUT" r
