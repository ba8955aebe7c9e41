# lib.sh: shared by the scenario scripts. Starts `sparsed serve` on the bundled model (or uses
# $SD_URL when set: any OpenAI-compatible server), runs sdload, and reads /metrics and /proc.
#   SPARSED_BIN (default build/sparsed)  MODEL (models/tiny)  PORT (18080)  OUT (results dir)
#   SERVE_ARGS  extra flags for `sparsed serve`;  CONFIG  a config file (default: built-in defaults)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SPARSED_BIN=${SPARSED_BIN:-build/sparsed}
MODEL=${MODEL:-models/tiny}
PORT=${PORT:-18080}
OUT=${OUT:-results/tmp/loadtest}
PY=${PYTHON:-python3}
SDLOAD="$PY loadtest/sdload.py"
mkdir -p "$OUT"
SRV_PID=""

# start_server [flags...]: starts the daemon (unless SD_URL is set) and waits for /ready.
start_server() {
    if [[ -n ${SD_URL:-} ]]; then
        URL=$SD_URL
        return
    fi
    URL="http://127.0.0.1:$PORT"
    # Built-in defaults unless CONFIG names a file: results must not depend on config/sparsed.json.
    local config=${CONFIG:-$OUT/defaults.json}
    [[ -n ${CONFIG:-} ]] || echo '{}' >"$config"
    "$SPARSED_BIN" serve --config "$config" --model "$MODEL" --host 127.0.0.1 --port "$PORT" --log-level warn ${SERVE_ARGS:-} "$@" \
        >"$OUT/server.log" 2>&1 &
    SRV_PID=$!
    trap stop_server EXIT
    # READY_TIMEOUT (seconds, default 300): an 8B-70B checkpoint loads and warms up (engine/warmup.h) first
    local t0=$SECONDS
    for _ in $(seq 1 $((${READY_TIMEOUT:-300} * 10))); do
        if curl -fs "$URL/ready" >/dev/null 2>&1; then
            echo "server pid $SRV_PID ready at $URL after $((SECONDS - t0)) s ($*)"
            return
        fi
        kill -0 "$SRV_PID" 2>/dev/null || { cat "$OUT/server.log"; echo "server exited" >&2; exit 1; }
        sleep 0.1
    done
    echo "server not ready after ${READY_TIMEOUT:-300} s" >&2
    exit 1
}

stop_server() {
    if [[ -n $SRV_PID ]] && kill -0 "$SRV_PID" 2>/dev/null; then
        kill -TERM "$SRV_PID"
        wait "$SRV_PID" 2>/dev/null || true
    fi
    SRV_PID=""
}

# metric NAME: one value from /metrics.
metric() {
    curl -fs "$URL/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}

# wait_idle: until no sequence runs or waits (30 s at most).
wait_idle() {
    for _ in $(seq 1 300); do
        [[ $(metric sparsed_num_requests_running) == 0 && $(metric sparsed_num_requests_waiting) == 0 ]] && return
        sleep 0.1
    done
}

# proc_snapshot LABEL: RSS (kB), open fds and KV usage of the local server, one line.
proc_snapshot() {
    [[ -z $SRV_PID ]] && return
    local rss fds
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$SRV_PID/status")
    fds=$(ls "/proc/$SRV_PID/fd" | wc -l)
    echo "$1: rss_kb=$rss fds=$fds kv_usage=$(metric sparsed_kv_cache_usage_ratio)" | tee -a "$OUT/snapshots.txt"
}
