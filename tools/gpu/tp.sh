#!/usr/bin/env bash
# tools/gpu/tp.sh: the tensor-parallel checks on a 2-GPU machine, against build/gpu (built by the
# caller: `source tools/device_env.sh && make -j32 BUILD=build/gpu all`). Run from the repo root:
#   bash tools/gpu/tp.sh
# 1. test_tp_bootstrap (CPU) and test_tp_gpu: TP=2 over threads and over processes against the
#    single-GPU backend (tiny, random dense / 2:4 / unstructured; vocabulary-split embedding,
#    tied and untied), a killed rank; test_cuda_backend: the single-GPU path still passes.
# 2. tests/server/test_tp_processes.py: `sparsed serve` as two processes (one GPU each, NCCL on
#    its socket transport) gives the tokens of the one-process TP=2 daemon and of one GPU.
# 3. tests/server/test_tp_kill.py: SIGKILL to rank 1 mid-stream (streams end with an error,
#    rank 0 exits non-zero), SIGKILL to rank 0 (rank 1 exits), SIGTERM (both exit 0).
# 4. Time permitting: decode benchmark of Llama-3.1-8B shapes at TP=2 (embedding now split).
# Everything fits in 4 minutes (each step has a timeout out of what is left). Writes two
# files: $OUT/tp-summary.txt (one line per step) and $OUT/tp.log (all output).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-build/gpu}
SUM="$OUT/tp-summary.txt"
LOG="$OUT/tp.log"
: >"$SUM"
: >"$LOG"
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export SD_BUILD=$B
START=$(date +%s)
BUDGET=${TP_BUDGET_S:-235}

source "$(dirname "$0")/lib.sh" # left, step

{
    nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
    nvidia-smi topo -m
} >>"$LOG" 2>&1
echo "GPUs: $(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" | tee -a "$SUM"

step test_tp_bootstrap 30 $B/tests/engine/test_tp_bootstrap
step test_tp_gpu 90 $B/tests/engine/test_tp_gpu
step test_cuda_backend 40 $B/tests/engine/test_cuda_backend
step test_tp_processes 80 python3 -m pytest -q -x -p no:cacheprovider tests/server/test_tp_processes.py
step test_tp_kill 60 python3 -m pytest -q -p no:cacheprovider tests/server/test_tp_kill.py
step bench_tp2 45 $B/sparsed bench decode --preset config/presets/llama-3.1-8b.json --pattern dense,2:4 \
    --batch 1,16 --warmup 10 --steps 20 --tensor-parallel 2
echo "total: $(( $(date +%s) - START ))s" | tee -a "$SUM"
