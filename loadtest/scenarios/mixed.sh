#!/usr/bin/env bash
# Long prompts mixed with short ones (chunked prefill next to decode): LONG_FRACTION of the
# requests carry LONG_LEN-token prompts; compare the short requests' TPOT with steady.sh's.
source "$(dirname "$0")/lib.sh"
start_server ${SERVE_FLAGS:-}
$SDLOAD --base-url "$URL" --dataset mixed --input-len 32 --long-input-len "${LONG_LEN:-1024}" \
    --long-fraction "${LONG_FRACTION:-0.1}" --output-len 32 --ignore-eos --num-prompts "${N:-200}" \
    --request-rate "${RATES:-2,4,8}" --warmup 4 --result-json "$OUT/mixed.json" "$@" | tee "$OUT/mixed.txt"
