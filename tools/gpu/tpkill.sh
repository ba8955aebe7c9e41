#!/usr/bin/env bash
# tools/gpu/tpkill.sh: issue #6 (rank 0 hung when a follower died mid-decode) on a 2-GPU machine,
# against build/gpu (built by the caller: `source tools/device_env.sh && make -j32 BUILD=build/gpu
# all`). Run from the repo root: bash tools/gpu/tpkill.sh   (about 60 s at most)
# 1. test_tp_gpu's *_after_graphs cases: TP=2 over processes, decode steps replayed from CUDA
#    graphs, then the follower killed (rank 0's next step fails by the peer watch and its
#    teardown ends) or rank 0 killed (the follower exits 1 within 12 s). Before the fix the abort
#    waited for the graphs: a hang, cut by the timeout.
# 2. tests/server/test_tp_kill.py: SIGKILL to rank 1 while four completions stream (each ends
#    with an error within seconds, rank 0 exits 1); then, time permitting, SIGKILL to rank 0.
# Writes $OUT/tpkill-summary.txt (one line per step) and $OUT/tpkill.log (all output).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-build/gpu}
SUM="$OUT/tpkill-summary.txt"
LOG="$OUT/tpkill.log"
: >"$SUM"
: >"$LOG"
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export SD_BUILD=$B
export SD_TP_KILL_JOIN_S=${SD_TP_KILL_JOIN_S:-12} # streams must end within 12 s of the kill
START=$(date +%s)
BUDGET=${TPKILL_BUDGET_S:-55}

STEP_MIN_S=12
source "$(dirname "$0")/lib.sh" # left, step

echo "GPUs: $(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" | tee -a "$SUM"
step test_tp_gpu:after_graphs 25 env SD_TP_GPU_ONLY=after_graphs $B/tests/engine/test_tp_gpu
step test_tp_kill:follower_mid_decode 30 python3 -m pytest -q -p no:cacheprovider \
    "tests/server/test_tp_kill.py::test_kill_follower_mid_decode"
step test_tp_kill:rank0_follower_exits 25 python3 -m pytest -q -p no:cacheprovider \
    "tests/server/test_tp_kill.py::test_kill_rank0_follower_exits"
echo "total: $(($(date +%s) - START))s" | tee -a "$SUM"
