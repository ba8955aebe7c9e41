#!/usr/bin/env bash
# Third session, first GPU call (one H200): build; the decode step split into its parts
# (SD_BENCH_SKIP=linears|small, synthetic Llama-3.1-8B, dense and 2:4, B=1 and 16) to size the
# fusion work of issue #4; then tools/gpu/prune8b.sh (issue #7: SparseGPT 2:4 of a whole 8B shape,
# time per layer, peak GPU memory).
#   TOK=.tok/llama3 bash results/2026-11-30-s3/run1.sh     (repo root, .debs and .tok carried)
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/r
mkdir -p "$R"
source tools/device_env.sh
B=build/gpu
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
make -j32 BUILD=$B all >"$R/build.log" 2>&1
echo "build rc=$? $(el) s" | tee -a "$R/summary.txt"
P=config/presets/llama-3.1-8b.json
for skip in none linears small; do
    SD_BENCH_SKIP=$skip timeout 100 $B/sparsed bench decode --preset $P --pattern dense,2:4 --batch 1,16 \
        --out "$R/decode-skip-$skip.md" >>"$R/decode.log" 2>&1
    echo "decode skip=$skip rc=$? $(el) s" | tee -a "$R/summary.txt"
    grep -E '^\| (dense|2:4) ' "$R/decode-skip-$skip.md" | sed "s/^/$skip /" >>"$R/summary.txt"
done
OUT=$R B=$B TOK=${TOK:-.tok/llama3} timeout $((570 - $(el))) bash tools/gpu/prune8b.sh >"$R/prune8b-run.log" 2>&1
echo "prune8b rc=$? $(el) s" | tee -a "$R/summary.txt"
tar czf "$OUT/r.tgz" -C "$OUT" r
