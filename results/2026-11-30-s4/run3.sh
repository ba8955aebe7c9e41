#!/usr/bin/env bash
# Fourth session, third GPU call (one H200): q/k/v post-processing fused into the decode attention
# (SD_ATTN_FUSED, merged with the one-round-trip tile loads). Against the tree before
# (../.snapold = the commit before the merge), side by side:
#   1. GPU tests of the new tree (fused vs two kernels bit for bit, attention vs fp64, CUDA
#      backend vs CPU, scheduler on CUDA);
#   2. sparsed bench decode, synthetic Llama-3.1-8B, dense and 2:4, B=1 and 16: ctx 512 old, new,
#      new SD_ATTN_FUSED=0, old, new; ctx 4096 new, new SD_ATTN_FUSED=0;
#   3. Qwen3-14B and Qwen3-32B shapes, dense,2:4,8:16,16:32, B=1 and 16, ctx 512, new.
#   bash results/2026-11-30-s4/run3.sh     (in the new tree; .debs carried, old tree at ../.snapold)
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
t engine/test_attn_fused_gpu 120
grep -iE "fail|cases" "$R/test_attn_fused_gpu.log" | head -20 >>"$R/summary.txt"
t engine/test_attn_prefill_gpu 120
grep -E "decode cases|60 cases" "$R/test_attn_prefill_gpu.log" >>"$R/summary.txt"
t engine/test_cuda_backend 150
t engine/test_sched_cuda 120
bench() { # name binary preset patterns ctx [env]
    env ${6:-X=1} timeout 120 $2 bench decode --preset config/presets/$3.json --pattern $4 --batch 1,16 \
        --ctx $5 --out "$R/decode-$1.md" >>"$R/decode.log" 2>&1
    echo "decode $1 rc=$? $(el) s" | tee -a "$R/summary.txt"
    grep -E '^\| (dense|2:4|8:16|16:32) ' "$R/decode-$1.md" | sed "s/^/$1 /" >>"$R/summary.txt"
}
bench old-512 $OLD/build/gpu/sparsed llama-3.1-8b dense,2:4 512
bench new-512 $B/sparsed llama-3.1-8b dense,2:4 512
bench new-512-unfused $B/sparsed llama-3.1-8b dense,2:4 512 SD_ATTN_FUSED=0
bench old2-512 $OLD/build/gpu/sparsed llama-3.1-8b dense,2:4 512
bench new2-512 $B/sparsed llama-3.1-8b dense,2:4 512
bench new-4096 $B/sparsed llama-3.1-8b dense,2:4 4096
bench new-4096-unfused $B/sparsed llama-3.1-8b dense,2:4 4096 SD_ATTN_FUSED=0
bench qwen3-14b $B/sparsed qwen3-14b dense,2:4,8:16,16:32 512
bench qwen3-32b $B/sparsed qwen3-32b dense,2:4,8:16,16:32 512
tar czf "$OUT/r.tgz" -C "$OUT" r
