#!/usr/bin/env bash
# Fourth session, fourth GPU call (one H200): the RMSNorm epilogue (the o and down projections'
# last block normalises the residual stream for the next linear, steps of <= 4 tokens;
# SD_NORM_EPI=0 turns it off). Against the tree before (../.snapold = the commit before):
#   1. GPU tests of the new tree (epilogue on every kernel family, kernels vs fp64, fused
#      attention, CUDA backend vs CPU, scheduler on CUDA);
#   2. sparsed bench decode, synthetic Llama-3.1-8B, dense and 2:4, B=1 and 16, ctx 512: old,
#      new, new SD_NORM_EPI=0, old, new;
#   3. the full decode table of the new tree: 8B dense,2:4,8:16,16:32 at B=1,4,16,64, ctx 512;
#   4. sparsed bench kernels --quick (new).
#   bash results/2026-11-30-s4/run4.sh     (in the new tree; .debs carried, old tree at ../.snapold)
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
    grep -E "FAIL" "$R/$(basename $1).log" | head -8 >>"$R/summary.txt"
}
t kernels/test_spmv_norm_gpu 120
t kernels/test_spmv_gpu 150
t engine/test_attn_fused_gpu 120
t engine/test_cuda_backend 150
t engine/test_sched_cuda 120
bench() { # name binary patterns batches [env]
    env ${5:-X=1} timeout 150 $2 bench decode --preset config/presets/llama-3.1-8b.json --pattern $3 \
        --batch $4 --ctx 512 --out "$R/decode-$1.md" >>"$R/decode.log" 2>&1
    echo "decode $1 rc=$? $(el) s" | tee -a "$R/summary.txt"
    grep -E '^\| (dense|2:4|8:16|16:32) ' "$R/decode-$1.md" | sed "s/^/$1 /" >>"$R/summary.txt"
}
bench old $OLD/build/gpu/sparsed dense,2:4 1,16
bench new $B/sparsed dense,2:4 1,16
bench new-noepi $B/sparsed dense,2:4 1,16 SD_NORM_EPI=0
bench old2 $OLD/build/gpu/sparsed dense,2:4 1,16
bench new2 $B/sparsed dense,2:4 1,16
bench full $B/sparsed dense,2:4,8:16,16:32 1,4,16,64
timeout 150 $B/sparsed bench kernels --quick --reps 30 --out "$R/kern-new.md" >/dev/null 2>"$R/kern-new.err"
echo "kernels new rc=$? $(el) s" | tee -a "$R/summary.txt"
tar czf "$OUT/r.tgz" -C "$OUT" r
