#!/usr/bin/env bash
# tools/gpu/prefill.sh: the tiled prefill attention checks, against build/gpu (built by the caller:
# `source tools/device_env.sh && make -j32 BUILD=build/gpu all`). Run from the repo root:
#   bash tools/gpu/prefill.sh
# 1. test_attn_prefill_gpu: the tiled kernel vs a CPU fp64 reference and the split kernel (T 1 to
#    1000, first and later chunks, GQA 1/4/8, head_dim 64/128), a mixed step through the dispatch,
#    then the old vs new time for T = 2048 (printed as a table row).
# 2. test_cuda_backend with SD_ATTN_PREFILL=1: CUDA vs CPU logits with prefill on the tiled path.
# 3. test_cuda_backend with SD_ATTN_PREFILL=0, only if 2 failed: tells a tiled-path failure from a
#    pre-existing one.
# Fits in 55 seconds. Writes $OUT/prefill-summary.txt (one line per step, the timing row) and
# $OUT/prefill.log (full output).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-build/gpu}
SUM="$OUT/prefill-summary.txt"
LOG="$OUT/prefill.log"
: >"$SUM"
: >"$LOG"
START=$(date +%s)
BUDGET=${PREFILL_BUDGET_S:-55}

STEP_MIN_S=5
source "$(dirname "$0")/lib.sh" # left, step

{ nvidia-smi --query-gpu=index,name --format=csv,noheader; } 2>&1 | head -2 >>"$SUM"
step test_attn_prefill_gpu 30 "$B/tests/engine/test_attn_prefill_gpu"
grep -E '^  \||worst rel L2|mixed step|FAIL' "$OUT/.step.out" >>"$SUM" 2>/dev/null
if ! step "test_cuda_backend SD_ATTN_PREFILL=1" 40 env SD_ATTN_PREFILL=1 "$B/tests/engine/test_cuda_backend"; then
    grep -E 'FAIL' "$OUT/.step.out" >>"$SUM" 2>/dev/null
    step "test_cuda_backend SD_ATTN_PREFILL=0" 40 env SD_ATTN_PREFILL=0 "$B/tests/engine/test_cuda_backend"
fi
rm -f "$OUT/.step.out"
echo "total: $(($(date +%s) - START)) s" | tee -a "$SUM"
