# tools/gpu/lib.sh: the budgeted step runner of the GPU scripts (sourced). The caller sets
# START (date +%s at its start), BUDGET (seconds for the whole script), OUT, LOG (full output)
# and SUM (one line per step); STEP_MIN_S (default 10) is the least time worth starting a step.

left() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME MAX_SECONDS CMD...: runs CMD under the smaller of MAX_SECONDS and the time left; its
# output goes to $LOG and stays in $OUT/.step.out for the caller to pick lines from; $SUM gets
# the exit status, the time and the output's last result line. Returns CMD's status (0 when
# skipped for want of time: the summary says so).
step() {
    local name=$1 max=$2
    shift 2
    local t s0 rc last
    t=$(left)
    [ "$t" -gt "$max" ] && t=$max
    if [ "$t" -lt "${STEP_MIN_S:-10}" ]; then
        echo "$name: SKIPPED (out of time)" | tee -a "$SUM"
        return 0
    fi
    echo "===== $name (timeout ${t}s): $*" >>"$LOG"
    s0=$(date +%s)
    timeout -k 2 "$t" "$@" >"$OUT/.step.out" 2>&1
    rc=$?
    cat "$OUT/.step.out" >>"$LOG"
    last=$(grep -E "passed|failed|skipped|rror|SKIP" "$OUT/.step.out" | tail -1)
    [ $rc -eq 124 ] && last="TIMED OUT (a hang, or too slow) | $last"
    echo "$name: rc=$rc $(($(date +%s) - s0))s | $last" | tee -a "$SUM"
    return $rc
}
