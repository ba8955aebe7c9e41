#!/usr/bin/env bash
# tools/gpu/sample.sh: the GPU-sampling checks, against build/gpu (built by the caller:
# `source tools/device_env.sh && make -j32 BUILD=build/gpu all`). Run from the repo root:
#   bash tools/gpu/sample.sh
# 1. test_sample_req (CPU): penalty lists, the host-drawn uniform, the CPU twin vs sd_sample.
# 2. test_cuda_sample: the kernel vs sd_sample / sd_logprob_of / sd_logprobs_top on random rows
#    (vocab 1 .. 151936), the scheduler on tiny with GPU sampling vs SD_CPU_SAMPLING=1 (one GPU,
#    and TP=2 when two GPUs are present), then (SD_SAMPLE_BENCH=1) a table of sampling times.
# 3. test_sched_cuda and test_cuda_backend: the scheduler's GPU tests, which now sample on the
#    GPU for their decode steps, and the backend itself.
# Fits in 3 minutes (each step has a timeout out of what is left). Writes two files:
# $OUT/sample-summary.txt (one line per step, then the timing table) and $OUT/sample.log.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-build/gpu}
SUM="$OUT/sample-summary.txt"
LOG="$OUT/sample.log"
: >"$SUM"
: >"$LOG"
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
START=$(date +%s)
BUDGET=${SAMPLE_BUDGET_S:-170}

source "$(dirname "$0")/lib.sh" # left, step

nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader >>"$SUM" 2>&1
step test_sample_req 40 "$B/tests/engine/test_sample_req"
step test_cuda_sample 110 env SD_SAMPLE_BENCH=1 "$B/tests/engine/test_cuda_sample"
grep -E '^\|' "$OUT/.step.out" >>"$SUM" 2>/dev/null
grep -E 'near-boundary|rows sampled|FAIL' "$OUT/.step.out" >>"$SUM" 2>/dev/null
step test_sched_cuda 60 "$B/tests/engine/test_sched_cuda"
step test_cuda_backend 60 "$B/tests/engine/test_cuda_backend"
rm -f "$OUT/.step.out"
echo "total: $(($(date +%s) - START)) s" | tee -a "$SUM"
