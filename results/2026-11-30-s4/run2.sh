#!/usr/bin/env bash
# Fourth session, second GPU call (one H200): decode attention issues all of a tile's K and V
# loads before any use; the dense tensor-core GEMV loads its first step before the PDL wait and
# prefetches the next. Against the tree before (../.snapold = the commit before), side by side:
#   1. GPU tests of the new tree (attention vs fp64, kernels vs fp64, CUDA backend vs CPU);
#   2. sparsed bench decode, synthetic Llama-3.1-8B, dense and 2:4, B=1 and 16: ctx 512 old,
#      new, old, new; ctx 4096 old, new; new with SD_BENCH_SKIP=attn (the attention's share);
#   3. sparsed bench kernels --quick, old and new.
#   bash results/2026-11-30-s4/run2.sh     (in the new tree; .debs carried, old tree at ../.snapold)
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
}
t engine/test_attn_prefill_gpu 120
grep -E "decode cases|60 cases|mixed step|attention T=2048" "$R/test_attn_prefill_gpu.log" >>"$R/summary.txt"
t kernels/test_spmv_gpu 150
t engine/test_cuda_backend 150
P=config/presets/llama-3.1-8b.json
bench() { # name binary ctx [env]
    env ${4:-X=1} timeout 100 $2 bench decode --preset $P --pattern dense,2:4 --batch 1,16 --ctx $3 \
        --out "$R/decode-$1.md" >>"$R/decode.log" 2>&1
    echo "decode $1 rc=$? $(el) s" | tee -a "$R/summary.txt"
    grep -E '^\| (dense|2:4) ' "$R/decode-$1.md" | sed "s/^/$1 /" >>"$R/summary.txt"
}
bench old-512 $OLD/build/gpu/sparsed 512
bench new-512 $B/sparsed 512
bench old2-512 $OLD/build/gpu/sparsed 512
bench new2-512 $B/sparsed 512
bench old-4096 $OLD/build/gpu/sparsed 4096
bench new-4096 $B/sparsed 4096
bench new-512-skipattn $B/sparsed 512 SD_BENCH_SKIP=attn
timeout 150 $B/sparsed bench kernels --quick --reps 30 --out "$R/kern-new.md" >/dev/null 2>"$R/kern-new.err"
echo "kernels new rc=$? $(el) s" | tee -a "$R/summary.txt"
timeout 150 $OLD/build/gpu/sparsed bench kernels --quick --reps 30 --out "$R/kern-old.md" >/dev/null \
    2>"$R/kern-old.err"
echo "kernels old rc=$? $(el) s" | tee -a "$R/summary.txt"
tar czf "$OUT/r.tgz" -C "$OUT" r
