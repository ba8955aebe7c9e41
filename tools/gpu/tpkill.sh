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

left() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME MAX_SECONDS CMD...: CMD under the smaller of MAX_SECONDS and the time left.
step() {
    local name=$1 max=$2
    shift 2
    local t=$(left)
    [ "$t" -gt "$max" ] && t=$max
    if [ "$t" -lt 12 ]; then
        echo "$name: SKIPPED (out of time)" | tee -a "$SUM"
        return
    fi
    echo "===== $name (timeout ${t}s): $*" >>"$LOG"
    local s0=$(date +%s) n0=$(wc -l <"$LOG")
    timeout -k 2 "$t" "$@" >>"$LOG" 2>&1
    local rc=$?
    local last=$(tail -n +$((n0 + 1)) "$LOG" | grep -E "passed|failed|skipped|rror|SKIP" | tail -1)
    [ $rc -eq 124 ] && last="TIMED OUT (a hang, or the group was slow to start) | $last"
    echo "$name: rc=$rc $(($(date +%s) - s0))s | $last" | tee -a "$SUM"
}

echo "GPUs: $(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" | tee -a "$SUM"
step test_tp_gpu:after_graphs 25 env SD_TP_GPU_ONLY=after_graphs $B/tests/engine/test_tp_gpu
step test_tp_kill:follower_mid_decode 30 python3 -m pytest -q -p no:cacheprovider \
    "tests/server/test_tp_kill.py::test_kill_follower_mid_decode"
step test_tp_kill:rank0_follower_exits 25 python3 -m pytest -q -p no:cacheprovider \
    "tests/server/test_tp_kill.py::test_kill_rank0_follower_exits"
echo "total: $(($(date +%s) - START))s" | tee -a "$SUM"
