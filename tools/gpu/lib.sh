# tools/gpu/lib.sh: the budgeted step runner of the GPU scripts, and the steady-load run of
# san.sh and load8b.sh (sourced). For `step` the caller sets START (date +%s at its start),
# BUDGET (seconds for the whole script), OUT, LOG (full output) and SUM (one line per step);
# STEP_MIN_S (default 10) is the least time worth starting a step.

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

# steady_load DIR MODEL LIMIT ARGS...: loadtest/scenarios/steady.sh on MODEL served by $B/sparsed
# (--backend ${BACKEND:-cuda}, 64 slots, a deep queue, and no per-IP limit: one client address,
# so that the unlimited-rate level can open every stream) at $RATES, $N requests per rate,
# 128-token prompts and $OUTLEN output tokens, on port $PORT (SERVE_EXTRA: more daemon flags, e.g.
# "--warmup false"); killed after LIMIT seconds. ARGS
# go to the scenario. Results in DIR (steady.txt, .json, .png), output in DIR.log; returns the
# scenario's status.
steady_load() {
    local dir=$1 model=$2 limit=$3
    shift 3
    SPARSED_BIN=$B/sparsed MODEL=$model OUT=$dir PORT=$PORT NAME=steady RATES=$RATES N=$N IN=128 \
        OUTLEN=$OUTLEN SERVE_FLAGS="--backend ${BACKEND:-cuda} --max-seqs 64 --max-queue 1024 --max-connections-per-ip 0 ${SERVE_EXTRA:-}" \
        timeout "$limit" loadtest/scenarios/steady.sh "$@" >"$dir.log" 2>&1
}

# steady_table DIR: a steady_load run's result table, as a Markdown code block (the end of its
# output when the run left no table).
steady_table() {
    echo '```'
    sed -n '/^ *load  *ok/,$p' "$1/steady.txt" 2>/dev/null || tail -20 "$1.log"
    cat "$1/steady.machine.txt" 2>/dev/null
    echo '```'
}

# prebuilt_start: what a run of prebuilt binaries (tools/gpu/prebuild.sh) does first: the carried
# Llama-3 tokenizer unpacked into results/tmp, the device's cuSPARSELt named (the binaries carry the
# build machine's path to it; the device's comes with PyTorch), the build step of tools/gpu_ab.sh
# (skipped with AB_PREBUILT) and the GPU's name, driver, power limit and clock in $R/gpu.txt.
prebuilt_start() {
    tar xJf results/tmp/llama3.tar.xz -C results/tmp
    SD_CUSPARSELT_LIB=$(python3 -c 'import nvidia.cusparselt as m; print(list(m.__path__)[0])' 2>/dev/null)/lib/libcusparseLt.so.0
    export SD_CUSPARSELT_LIB
    ab_build
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$R/gpu.txt" 2>&1
}

# ab_time_left / ab_have N WHAT: seconds left of AB_LIMIT_S (default 570) since the run began;
# ab_have fails, noting WHAT as skipped, when N or fewer are left.
ab_time_left() { echo $((${AB_LIMIT_S:-570} - $(ab_el))); }
ab_have() { [ "$(ab_time_left)" -gt "$1" ] || { ab_note "skipped (time): $2"; return 1; }; }

# ab_bench NAME KIND ENV... -- ARGS: one `sparsed bench KIND --preset $P8 ARGS` with ENV set
# (SD_TUNE_LOG=1 too), at most AB_BENCH_TIMEOUT seconds (default 120), skipped with less than
# AB_BENCH_MIN (default 40) left; its table rows go to summary.txt prefixed with NAME, all to
# $R/KIND-NAME.md / .err, and the results are packed.
ab_bench() {
    local name=$1 kind=$2
    shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    ab_have "${AB_BENCH_MIN:-40}" "$kind $name" || return 0
    env "${envs[@]}" SD_TUNE_LOG=1 timeout "${AB_BENCH_TIMEOUT:-120}" build/gpu/sparsed bench "$kind" \
        --preset "$P8" "$@" --out "$R/$kind-$name.md" >/dev/null 2>"$R/$kind-$name.err"
    ab_note "bench $kind $name rc=$? $(ab_el) s"
    grep -E '^\| (dense|[0-9]+:[0-9]+) ' "$R/$kind-$name.md" | sed "s/^/$name /" >>"$R/summary.txt"
    ab_pack
}

# b1_records: issue #3's and #4's batch-1 records in $R: every pattern's decode at Llama-3.1-8B
# shapes (decode-b1.md, rows into summary.txt) and the 8B kernel table at batch 1 and 8
# (kern-8b.md), each skipped with 60 s or less of AB_LIMIT_S left.
b1_records() {
    local t
    if ab_have 60 "decode b1"; then
        t=$(ab_time_left)
        timeout $((t < 120 ? t : 120)) build/gpu/sparsed bench decode --preset "$P8" \
            --pattern dense,2:4,4:8,8:16,16:32 --batch 1 --out "$R/decode-b1.md" >/dev/null 2>"$R/decode-b1.err"
        ab_note "bench decode b1 rc=$? $(ab_el) s"
        grep -E '^\| (dense|[0-9]+:[0-9]+) ' "$R/decode-b1.md" >>"$R/summary.txt"
        ab_pack
    fi
    if ab_have 60 "kernels"; then
        timeout "$(ab_time_left)" build/gpu/sparsed bench kernels --model 8B --tp 1 --batch 1,8 --reps 20 \
            --out "$R/kern-8b.md" >/dev/null 2>"$R/kern-8b.err"
        ab_note "bench kernels rc=$? $(ab_el) s"
        ab_pack
    fi
}
