#!/usr/bin/env bash
# Steady load at several Poisson rates up to and past saturation; JSON, table and plot in $OUT.
#   RATES (default 1,2,4,8,16,32,inf)  N (requests per rate, 200)  IN/OUTLEN (64/32)
#   NAME (output file stem, default steady); extra arguments go to sdload (e.g. --concurrency
#   1,2,4,8,16,32 for a closed-loop sweep instead of rates)
source "$(dirname "$0")/lib.sh"
NAME=${NAME:-steady}
start_server ${SERVE_FLAGS:-}
echo "$(date -u +%FT%TZ) start; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/$NAME.machine.txt"
$SDLOAD --base-url "$URL" --request-rate "${RATES:-1,2,4,8,16,32,inf}" --num-prompts "${N:-200}" \
    --input-len "${IN:-64}" --output-len "${OUTLEN:-32}" --ignore-eos --warmup 8 --pause 2 \
    --goodput ttft:1000 tpot:100 --result-json "$OUT/$NAME.json" --plot "$OUT/$NAME.png" "$@" \
    | tee "$OUT/$NAME.txt"
echo "$(date -u +%FT%TZ) end; load average: $(cut -d' ' -f1-3 /proc/loadavg); server: preemptions" \
    "$(metric sparsed_preemptions_total), KV blocks $(metric sparsed_kv_cache_blocks_total)," \
    "prefix-cache hits $(metric sparsed_prefix_cache_hits_total) of $(metric sparsed_prefix_cache_queries_total)" \
    "prompt tokens" >>"$OUT/$NAME.machine.txt"
