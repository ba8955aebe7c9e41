#!/usr/bin/env bash
# tools/gpu/fused.sh: the fused q/k/v post-processing + decode attention (sd__cu_attn_fused), against
# build/gpu (built by the caller: `source tools/device_env.sh && make -j32 BUILD=build/gpu all`).
# Run from the repo root:
#   bash tools/gpu/fused.sh
# 1. test_attn_fused_gpu: the fused kernel vs qkv_post + the decode kernel, bit-identical output
#    and byte-identical caches over 48 cases; the two-kernel path vs a CPU fp64 reference.
# 2. test_attn_prefill_gpu: the decode and tiled kernels against fp64, as before.
# 3. test_cuda_backend (fusion on, the default: every all-decode step takes it), and with
#    SD_ATTN_FUSED=0 only if it failed: tells a fused-path failure from a pre-existing one.
# 4. bench decode side by side, SD_ATTN_FUSED=1, 0, 1, 0 (alternated, to see the noise): synthetic
#    Llama-3.1-8B dense and 2:4, batch 1 and 16, context 512; then Qwen3-14B dense (q/k norm).
# Writes $OUT/fused-summary.txt (one line per step, the bench table rows) and $OUT/fused.log.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-build/gpu}
SUM="$OUT/fused-summary.txt"
LOG="$OUT/fused.log"
: >"$SUM"
: >"$LOG"
START=$(date +%s)
BUDGET=${FUSED_BUDGET_S:-420}

STEP_MIN_S=5
source "$(dirname "$0")/lib.sh" # left, step

{ nvidia-smi --query-gpu=index,name --format=csv,noheader; } 2>&1 | head -2 >>"$SUM"
step test_attn_fused_gpu 60 "$B/tests/engine/test_attn_fused_gpu"
grep -E 'worst rel L2|FAIL' "$OUT/.step.out" | head -20 >>"$SUM" 2>/dev/null
step test_attn_prefill_gpu 30 "$B/tests/engine/test_attn_prefill_gpu"
grep -E 'FAIL' "$OUT/.step.out" | head -10 >>"$SUM" 2>/dev/null
if ! step "test_cuda_backend SD_ATTN_FUSED=1" 40 env SD_ATTN_FUSED=1 "$B/tests/engine/test_cuda_backend"; then
    grep -E 'FAIL' "$OUT/.step.out" | head -10 >>"$SUM" 2>/dev/null
    step "test_cuda_backend SD_ATTN_FUSED=0" 40 env SD_ATTN_FUSED=0 "$B/tests/engine/test_cuda_backend"
fi
bench() { # bench NAME PRESET PATTERN FUSED
    step "bench $1 fused=$4" 60 env SD_ATTN_FUSED=$4 "$B/sparsed" bench decode --preset "config/presets/$2.json" \
        --pattern "$3" --batch 1,16 --ctx 512 --out "$OUT/bench-$1-fused$4.md"
    grep -E '^\| ' "$OUT/bench-$1-fused$4.md" 2>/dev/null | grep -vE '^\| *(pattern|---)' |
        sed "s/^/$1 fused=$4 /" >>"$SUM"
}
for f in 1 0 1 0; do
    bench 8b-dense llama-3.1-8b dense $f
    bench 8b-2:4 llama-3.1-8b 2:4 $f
done
bench qwen3-14b-dense qwen3-14b dense 1
bench qwen3-14b-dense qwen3-14b dense 0
rm -f "$OUT/.step.out"
echo "total: $(($(date +%s) - START)) s" | tee -a "$SUM"
