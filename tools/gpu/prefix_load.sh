#!/usr/bin/env bash
# tools/gpu/prefix_load.sh: prefix caching under GPU load (README, known limits: its hit path had
# not been measured under load). A random 2:4 checkpoint at $PRESET shapes (tools/synth_ckpt.py)
# served with --backend cuda, the steady load of loadtest/scenarios/steady.sh at $RATES on prompts
# that open with one of $NPRE shared prefixes of $PRE tokens (sdload --dataset shared-prefix), then
# 128 tokens of their own (steady_load's), $OUTLEN out; once with --prefix-caching true, once
# false ($CACHES). Each run's table and prefix-cache hits (from /metrics) go to $R/summary.txt.
# KV_BLOCKS caps the pool (--kv-blocks) so that the cached prefixes and the running sequences
# outgrow it: eviction (and preemption) under load, e.g. KV_BLOCKS=600 NPRE=16.
#   tools/gpu/prefix_load.sh                        on the device, with prebuilt binaries:
#     tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/prefix_load.sh (carry .debs, results/tmp)
#   PRESET=models/tiny/config.json TOK=models/tiny BACKEND=cpu B=build PATTERN= RATES=4 N=16 \
#     bash tools/gpu/prefix_load.sh                 a dry run anywhere (no GPU steps)
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, steady_load, steady_table
PRESET=${PRESET:-config/presets/llama-3.1-8b.json}
TOK=${TOK:-results/tmp/llama3}
PATTERN=${PATTERN-2:4}
RATES=${RATES:-8,32} N=${N:-160} PRE=${PRE:-1024} NPRE=${NPRE:-4} OUTLEN=${OUTLEN:-64}
PORT=${PORT:-18290}
if [ "${BACKEND:-cuda}" = cuda ]; then
    prebuilt_start
    B=build/gpu
fi
mkdir -p "$R"
ck=/tmp/ck-prefix
python3 tools/synth_ckpt.py --config "$PRESET" --tokenizer "$TOK" --out "$ck" \
    ${PATTERN:+--pattern $PATTERN} >"$R/synth.log" 2>&1
ab_note "synth ${PATTERN:-dense} rc=$? $(ab_el) s"
for cache in ${CACHES:-true false}; do
    SERVE_EXTRA="--prefix-caching $cache ${KV_BLOCKS:+--kv-blocks $KV_BLOCKS}" steady_load "$R/prefix-$cache" "$ck" 150 \
        --dataset shared-prefix --prefix-len "$PRE" --num-prefixes "$NPRE" --timeout 120
    ab_note "prefix caching $cache rc=$? $(ab_el) s: $(grep -o 'ready at .* after [0-9]* s' "$R/prefix-$cache.log")"
    steady_table "$R/prefix-$cache" >>"$R/summary.txt"
    ab_pack
done
rm -rf "$ck"
