#!/usr/bin/env bash
# Clients that cancel mid-stream: half the streams hang up after 1..8 tokens. Afterwards the
# KV cache must be empty and the server's fds back where they were.
source "$(dirname "$0")/lib.sh"
start_server ${SERVE_FLAGS:-}
$SDLOAD --base-url "$URL" --num-prompts 20 --concurrency 4 --output-len 8 --quiet --progress-interval 0 >/dev/null
proc_snapshot before
$SDLOAD --base-url "$URL" --num-prompts "${N:-400}" --request-rate "${RATE:-16}" --output-len 64 --ignore-eos \
    --cancel-fraction 0.5 --cancel-after 8 --result-json "$OUT/cancel.json" "$@" | tee "$OUT/cancel.txt"
wait_idle
sleep 1
proc_snapshot after
usage=$(metric sparsed_kv_cache_usage_ratio)
[[ $usage == 0 || $usage == 0.000000 ]] || { echo "KV blocks leaked: usage $usage" >&2; exit 1; }
