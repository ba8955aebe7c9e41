#!/usr/bin/env bash
# Third session, last GPU call (one H200): the decode attention kernel after its merge fix,
# against the tree before it (../.snapold), then the 8B serving load test (issue #10):
#   1. GPU tests of the new tree (attention vs fp64, CUDA backend vs CPU);
#   2. sparsed bench decode old/new, synthetic Llama-3.1-8B, dense and 2:4, B=1 and 16, ctx 512
#      (new also with SD_ATTN_CHUNK=128) and 4096;
#   3. tools/gpu/load8b.sh with the new build (the old one if the attention tests failed).
#   TOK=.tok/llama3 bash results/2026-11-30-s3/run3.sh   (in the new tree; .debs, .tok carried)
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
ok=1
t() {
    timeout "$2" $B/tests/$1 >"$R/$(basename $1).log" 2>&1
    local rc=$?
    [ $rc = 0 ] || ok=0
    echo "$1 rc=$rc $(tail -1 "$R/$(basename $1).log") $(el) s" | tee -a "$R/summary.txt"
}
t engine/test_attn_prefill_gpu 120
grep -E "decode cases|60 cases|mixed step|attention T=2048" "$R/test_attn_prefill_gpu.log" >>"$R/summary.txt"
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
bench new-512-chunk128 $B/sparsed 512 SD_ATTN_CHUNK=128
bench old-4096 $OLD/build/gpu/sparsed 4096
bench new-4096 $B/sparsed 4096
LB=$B
[ $ok = 1 ] || LB=$OLD/build/gpu
echo "load8b with $LB" | tee -a "$R/summary.txt"
OUT=$R B=$LB TOK=${TOK:-.tok/llama3} timeout $((590 - $(el))) bash tools/gpu/load8b.sh >"$R/load8b-run.log" 2>&1
echo "load8b rc=$? $(el) s" | tee -a "$R/summary.txt"
tar czf "$OUT/r.tgz" -C "$OUT" r
