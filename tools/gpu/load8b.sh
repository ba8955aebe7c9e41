#!/usr/bin/env bash
# tools/gpu/load8b.sh: the serving load test at Llama-3.1-8B shapes, dense against N:M bitmask
# checkpoints (issue #10), on one H200 (about 2 minutes a checkpoint). Run from the repo root after
#   source tools/device_env.sh && make -j32 BUILD=build/gpu all
# with the Llama-3 tokenizer at $TOK (default ../shared/tokenizers/llama3; the device tool does not
# send ../shared: copy that folder into an ignored folder of the repo, name it in `carry`, and set
# TOK to it). Steps:
#   1. tools/synth_ckpt.py: random bf16 weights for config/presets/llama-3.1-8b.json (16 GB) in /tmp,
#      and with --pattern a random bitmask checkpoint (9 GB) for each of $PATTERNS (the kernels'
#      speed does not depend on which weights a mask keeps; a magnitude prune of the dense one took
#      253 s for 2:4, results/2026-11-30-s3/r3, and tools/gpu/prune8b.sh measures pruning itself);
#   2. loadtest/scenarios/steady.sh on each, served with --backend cuda: Poisson rates up to and
#      past saturation, 128-token prompts, 128 output tokens (ignore_eos), streamed; each checkpoint
#      is deleted after its run (the device's disk holds two at a time).
# Writes $OUT/load8b.md (a table per checkpoint and the set-up times) and $OUT/load8b.json.
set -uo pipefail
OUT=${OUT:-/tmp/out}
B=${B:-build/gpu}
TOK=${TOK:-../shared/tokenizers/llama3}
RATES=${RATES:-4,16,32,64,128,inf} # the 8B saturates near 60 req/s of 128 tokens (64 slots)
N=${N:-128}
PRESET=${PRESET:-config/presets/llama-3.1-8b.json}
BACKEND=${BACKEND:-cuda} # PRESET=models/tiny/config.json TOK=models/tiny BACKEND=cpu: a dry run anywhere
PATTERNS=${PATTERNS:-2:4,8:16} # the bitmask checkpoints served after the dense one ("" for dense only)
source "$(dirname "$0")/lib.sh" # steady_load, steady_table
mkdir -p "$OUT"
work=$(mktemp -d /tmp/load8b.XXXXXX)
md=$OUT/load8b.md
t0=$SECONDS
{
    echo "# Serving load at $(basename "$PRESET" .json) shapes (random weights), dense vs ${PATTERNS:-nothing}"
    echo
    echo "- date: $(date -u +%FT%TZ); GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
    echo "- command: \`bash tools/gpu/load8b.sh\` (PRESET=$PRESET, BACKEND=$BACKEND, RATES=$RATES, N=$N per rate,"
    echo "  PATTERNS=$PATTERNS, SERVE_EXTRA=${SERVE_EXTRA:-}, 128 in / 128 out, streamed)"
} >"$md"
variants=(dense)
IFS=, read -r -a pats <<<"$PATTERNS"
for p in "${pats[@]}"; do
    [[ -n $p ]] && variants+=("${p/:/of}")
done
for v in "${variants[@]}"; do
    t1=$SECONDS
    flags=()
    [[ $v != dense ]] && flags=(--pattern "${v/of/:}")
    if ! python3 tools/synth_ckpt.py --config "$PRESET" --tokenizer "$TOK" --out "$work/$v" "${flags[@]}" \
        >>"$work/setup.log" 2>&1; then
        echo "synth_ckpt $v failed" | tee -a "$md"
        tail -5 "$work/setup.log" >>"$md"
        continue
    fi
    echo "- synthetic checkpoint $v: $((SECONDS - t1)) s" >>"$md"
    t1=$SECONDS
    PORT=18282 OUTLEN=128 steady_load "$work/steady-$v" "$work/$v" 220 --timeout 200
    rc=$?
    for f in json png; do # kept as they come: a run cut later still has them
        cp "$work/steady-$v/steady.$f" "$OUT/load8b-$v.$f" 2>/dev/null
    done
    {
        echo
        echo "## $v (rc=$rc, $((SECONDS - t1)) s)"
        echo
        # the daemon's start: load, and the warm-up (engine/warmup.h) unless SERVE_EXTRA turns it off
        grep -o "ready at .* after [0-9]* s" "$work/steady-$v.log" | sed 's/^/- server /'
        echo
        steady_table "$work/steady-$v"
    } >>"$md"
    rm -rf "${work:?}/$v"
done
python3 - "$work" "$OUT/load8b.json" "${variants[@]}" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
res = {v: json.loads((work / f"steady-{v}" / "steady.json").read_text())
       for v in sys.argv[3:] if (work / f"steady-{v}" / "steady.json").exists()}
pathlib.Path(sys.argv[2]).write_text(json.dumps(res, indent=1))
PY
echo "total: $((SECONDS - t0)) s" >>"$md"
rm -rf "$work"
cat "$md"
