#!/usr/bin/env bash
# Second PDL run (one H200), after dropping the L2 prefetch and restoring single-launch autotune:
# build, GPU tests, kernels (8B shapes, PDL on), decode with PDL on and off, then the GPU
# scripts for sampling and pruning (tools/gpu/sample.sh, tools/gpu/prune.sh).
#   [SKIP_HELPERS=1] bash results/2026-11-30-pdl/run2.sh      (from the repo root, .debs carried)
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/r
mkdir -p "$R"
source tools/device_env.sh
B=build/gpu
start=$(date +%s)
make -k -j32 BUILD=$B all >"$R/build.log" 2>&1 || echo "make: some targets failed (see build.log)"
echo "build: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
grep -E "error" "$R/build.log" | head -20
t() {
    timeout "$2" $B/tests/$1 >"$R/$(basename $1).log" 2>&1
    echo "$1 rc=$? $(tail -1 "$R/$(basename $1).log")" | tee -a "$OUT/summary.txt"
}
t kernels/test_spmv_gpu 120
t engine/test_cuda_backend 120
$B/sparsed bench kernels --quick --reps 30 --out "$R/kern_pdl.md" >/dev/null 2>"$R/kern_pdl.err"
P=config/presets/llama-3.1-8b.json
for pdl in 1 0; do
    SD_PDL=$pdl timeout 100 $B/sparsed bench decode --preset $P --pattern dense,2:4 --batch 1,16 \
        --out "$R/decode_pdl$pdl.md" >>"$R/decode.log" 2>&1
    echo "decode SD_PDL=$pdl rc=$?" | tee -a "$OUT/summary.txt"
done
echo "mine: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
if [ -z "${SKIP_HELPERS:-}" ]; then
SAMPLE_BUDGET_S=150 OUT=$R timeout 170 bash tools/gpu/sample.sh >"$R/sample-run.log" 2>&1
echo "sample.sh rc=$? at $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
OUT=$R timeout 230 bash tools/gpu/prune.sh >"$R/prune-run.log" 2>&1
echo "prune.sh rc=$? at $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
fi
tar czf "$OUT/r.tgz" -C "$OUT" r
