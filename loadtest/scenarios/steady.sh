#!/usr/bin/env bash
# Steady load at several Poisson rates up to and past saturation; JSON, table and plot in $OUT.
#   RATES (default 1,2,4,8,16,32,inf)  N (requests per rate, 200)  IN/OUTLEN (64/32)
source "$(dirname "$0")/lib.sh"
start_server ${SERVE_FLAGS:-}
$SDLOAD --base-url "$URL" --request-rate "${RATES:-1,2,4,8,16,32,inf}" --num-prompts "${N:-200}" \
    --input-len "${IN:-64}" --output-len "${OUTLEN:-32}" --ignore-eos --warmup 8 --pause 2 \
    --goodput ttft:1000 tpot:100 --result-json "$OUT/steady.json" --plot "$OUT/steady.png" "$@" \
    | tee "$OUT/steady.txt"
