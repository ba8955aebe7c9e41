#!/usr/bin/env bash
# Soak: SOAK_SECONDS (default 1800 = 30 min; --short: 120) of mixed traffic (Poisson completions
# with cancellations, chat with long and short prompts, bursts past the queue), then checks that
# KV blocks, fds and RSS are back at their warmed-up baseline. tests/loadtest/test_soak.py is
# the CI variant of this in Python.
#   SOAK_RATE (10) Poisson req/s, SOAK_CLIENTS (12) closed-loop chat clients, SOAK_BURST (150)
#   requests per burst, SOAK_BURST_PAUSE (0) seconds between bursts; SERVE_FLAGS adds daemon
#   flags ("--threads 1" on a shared machine).
source "$(dirname "$0")/lib.sh"
secs=${SOAK_SECONDS:-1800}
rate=${SOAK_RATE:-10} clients=${SOAK_CLIENTS:-12} burst=${SOAK_BURST:-150} pause=${SOAK_BURST_PAUSE:-0}
[[ ${1:-} == --short ]] && secs=120
start_server --max-seqs 8 --max-queue 48 ${SERVE_FLAGS:-}
$SDLOAD --base-url "$URL" --num-prompts 24 --concurrency 8 --input-len 200 --output-len 8 --cancel-fraction 0.2 \
    --quiet --progress-interval 0 >/dev/null
wait_idle
proc_snapshot baseline
rss0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$SRV_PID/status") fds0=$(ls "/proc/$SRV_PID/fd" | wc -l)
third=$((secs / 3))
$SDLOAD --base-url "$URL" --duration "$third" --request-rate "$rate" --num-prompts 500 --input-len 24 --range-ratio 0.5 \
    --output-len 16 --ignore-eos --cancel-fraction 0.2 --max-concurrency 32 --progress-interval 30 --quiet \
    --result-json "$OUT/soak-poisson.json" | tail -3
proc_snapshot after-poisson
$SDLOAD --base-url "$URL" --duration "$third" --concurrency "$clients" --endpoint /v1/chat/completions --dataset mixed \
    --num-prompts 500 --input-len 16 --long-input-len 400 --long-fraction 0.15 --output-len 12 \
    --cancel-fraction 0.15 --progress-interval 30 --quiet --result-json "$OUT/soak-chat.json" | tail -3
proc_snapshot after-chat
end=$((SECONDS + third))
i=0
while ((SECONDS < end)); do
    i=$((i + 1))
    $SDLOAD --base-url "$URL" --request-rate inf --num-prompts "$burst" --input-len 16 --output-len 16 --ignore-eos \
        --cancel-fraction 0.1 --seed "$i" --quiet --progress-interval 0 --result-json "$OUT/soak-burst-$i.json" \
        | tail -1
    wait_idle
    sleep "$pause"
done
wait_idle
sleep 2
proc_snapshot end
echo "command: SOAK_SECONDS=$secs SOAK_RATE=$rate SOAK_CLIENTS=$clients SOAK_BURST=$burst SOAK_BURST_PAUSE=$pause SERVE_FLAGS=\"${SERVE_FLAGS:-}\" $0 $*"
rss1=$(awk '/^VmRSS:/ { print $2 }' "/proc/$SRV_PID/status") fds1=$(ls "/proc/$SRV_PID/fd" | wc -l)
usage=$(metric sparsed_kv_cache_usage_ratio)
echo "rss ${rss0} -> ${rss1} kB, fds ${fds0} -> ${fds1}, kv usage ${usage}"
ok=1
[[ $usage == 0 || $usage == 0.000000 ]] || { echo "LEAK: KV blocks in use" >&2; ok=0; }
((fds1 <= fds0)) || { echo "LEAK: file descriptors" >&2; ok=0; }
((rss1 <= rss0 * 5 / 4 + 16384)) || { echo "LEAK: RSS grew" >&2; ok=0; }
((ok)) && echo "soak: no leak"
((ok))
