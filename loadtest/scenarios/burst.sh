#!/usr/bin/env bash
# Bursts past the queue limit: a server admitting MAX_SEQS running + MAX_QUEUE waiting requests
# gets BURSTS bursts of 3x that at once. Expect clean 429s for the excess and no failure of an
# admitted request (sdload exits 1 if any request failed otherwise).
source "$(dirname "$0")/lib.sh"
MAX_SEQS=${MAX_SEQS:-8} MAX_QUEUE=${MAX_QUEUE:-32}
start_server --max-seqs "$MAX_SEQS" --max-queue "$MAX_QUEUE"
cap=$((MAX_SEQS + MAX_QUEUE))
for i in $(seq 1 "${BURSTS:-3}"); do
    $SDLOAD --base-url "$URL" --request-rate inf --num-prompts $((3 * cap)) --input-len 32 --output-len 16 \
        --ignore-eos --seed "$i" --quiet --progress-interval 0 --result-json "$OUT/burst-$i.json" "$@" \
        | tee "$OUT/burst-$i.txt"
    wait_idle
done
# The queue holds MAX_QUEUE; how many of a burst also reach the running batch before the queue
# fills depends on timing, so at least MAX_QUEUE (at most MAX_SEQS + MAX_QUEUE) are admitted.
$PY - "$OUT" "$cap" "$MAX_QUEUE" <<'PY'
import json, sys, glob
out, cap, queue = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for f in sorted(glob.glob(f"{out}/burst-*.json")):
    r = json.load(open(f))["runs"][0]
    admitted = r["completed"] + r["cancelled"]
    print(f"{f}: sent {r['sent']} admitted {admitted} (capacity {cap}) 429 {r['rejected_429']} failed {r['failed']}")
    assert r["failed"] == 0 and r["rejected_429"] > 0 and queue <= admitted <= cap, r["http_status"]
PY
