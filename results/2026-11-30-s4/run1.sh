#!/usr/bin/env bash
# Fourth session, first GPU call (one H200): the gather SpMV / GEMV load their first step's
# weights before the PDL wait and prefetch the next step's; the o and down projections add into
# the residual stream (SD_RESID_ACC). Against the tree before (../.snapold), side by side:
#   1. GPU tests of the new tree (kernels vs fp64 twin, CUDA backend vs CPU, scheduler on CUDA
#      with prefix caching, attention);
#   2. sparsed bench decode, synthetic Llama-3.1-8B, dense and 2:4, B=1 and 16, ctx 512:
#      old, new, new with SD_RESID_ACC=0, old again, new again;
#   3. the step split into parts on the new tree (SD_BENCH_SKIP=norm|qkvpost|attn|swiglu|small);
#   4. sparsed bench kernels --quick, old and new.
#   bash results/2026-11-30-s4/run1.sh     (in the new tree; .debs carried, old tree at ../.snapold)
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
t kernels/test_spmv_gpu 150
t engine/test_cuda_backend 150
t engine/test_sched_cuda 120
t engine/test_attn_prefill_gpu 120
P=config/presets/llama-3.1-8b.json
bench() { # name binary [env]
    env ${3:-X=1} timeout 100 $2 bench decode --preset $P --pattern dense,2:4 --batch 1,16 --ctx 512 \
        --out "$R/decode-$1.md" >>"$R/decode.log" 2>&1
    echo "decode $1 rc=$? $(el) s" | tee -a "$R/summary.txt"
    grep -E '^\| (dense|2:4) ' "$R/decode-$1.md" | sed "s/^/$1 /" >>"$R/summary.txt"
}
bench old $OLD/build/gpu/sparsed
bench new $B/sparsed
bench new-noacc $B/sparsed SD_RESID_ACC=0
bench old2 $OLD/build/gpu/sparsed
bench new2 $B/sparsed
for skip in norm qkvpost attn swiglu small linears; do
    bench skip-$skip $B/sparsed SD_BENCH_SKIP=$skip
done
timeout 150 $B/sparsed bench kernels --quick --reps 30 --out "$R/kern-new.md" >/dev/null 2>"$R/kern-new.err"
echo "kernels new rc=$? $(el) s" | tee -a "$R/summary.txt"
timeout 150 $OLD/build/gpu/sparsed bench kernels --quick --reps 30 --out "$R/kern-old.md" >/dev/null \
    2>"$R/kern-old.err"
echo "kernels old rc=$? $(el) s" | tee -a "$R/summary.txt"
tar czf "$OUT/r.tgz" -C "$OUT" r
