#!/usr/bin/env bash
# tools/gpu/load8b.sh: the serving load test at Llama-3.1-8B shapes, dense against 2:4 (issue #10),
# on one H200 (about 9 minutes). Run from the repo root after
#   source tools/device_env.sh && make -j32 BUILD=build/gpu all
# with the Llama-3 tokenizer at $TOK (default ../shared/tokenizers/llama3; the device tool does not
# send ../shared: copy that folder into an ignored folder of the repo, name it in `carry`, and set
# TOK to it). Steps:
#   1. tools/synth_ckpt.py: random bf16 weights for config/presets/llama-3.1-8b.json (16 GB) in /tmp;
#   2. sparsed prune --solver magnitude --pattern 2:4 of it (the bitmask checkpoint, 9 GB);
#   3. loadtest/scenarios/steady.sh on each, served with --backend cuda: Poisson rates up to and
#      past saturation, 128-token prompts, 128 output tokens (ignore_eos), streamed.
# Writes $OUT/load8b.md (the two tables and the set-up times) and $OUT/load8b.json.
set -uo pipefail
OUT=${OUT:-/tmp/out}
B=${B:-build/gpu}
TOK=${TOK:-../shared/tokenizers/llama3}
RATES=${RATES:-4,16,32,64,128,inf} # the 8B saturates near 60 req/s of 128 tokens (64 slots)
N=${N:-128}
PRESET=${PRESET:-config/presets/llama-3.1-8b.json}
BACKEND=${BACKEND:-cuda} # PRESET=models/tiny/config.json TOK=models/tiny BACKEND=cpu: a dry run anywhere
source "$(dirname "$0")/lib.sh" # steady_load, steady_table
mkdir -p "$OUT"
work=$(mktemp -d /tmp/load8b.XXXXXX)
md=$OUT/load8b.md
t0=$SECONDS
{
    echo "# Serving load at $(basename "$PRESET" .json) shapes (random weights), dense vs 2:4"
    echo
    echo "- date: $(date -u +%FT%TZ); GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    echo "- command: \`bash tools/gpu/load8b.sh\` (PRESET=$PRESET, BACKEND=$BACKEND, RATES=$RATES, N=$N per rate,"
    echo "  128 in / 128 out, streamed)"
} >"$md"
python3 tools/synth_ckpt.py --config "$PRESET" --tokenizer "$TOK" --out "$work/dense" \
    >>"$work/setup.log" 2>&1 || { echo "synth_ckpt failed" | tee -a "$md"; tail -5 "$work/setup.log" >>"$md"; exit 1; }
echo "- synthetic checkpoint: $((SECONDS - t0)) s" >>"$md"
t1=$SECONDS
$B/sparsed prune --model "$work/dense" --out "$work/2of4" --pattern 2:4 --solver magnitude --quiet \
    >>"$work/setup.log" 2>&1 || { echo "prune failed" | tee -a "$md"; tail -5 "$work/setup.log" >>"$md"; }
echo "- magnitude 2:4 prune: $((SECONDS - t1)) s" >>"$md"
for v in dense 2of4; do
    [[ -d $work/$v ]] || continue
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
        steady_table "$work/steady-$v"
    } >>"$md"
done
python3 - "$work" "$OUT/load8b.json" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
res = {v: json.loads((work / f"steady-{v}" / "steady.json").read_text())
       for v in ("dense", "2of4") if (work / f"steady-{v}" / "steady.json").exists()}
pathlib.Path(sys.argv[2]).write_text(json.dumps(res, indent=1))
PY
echo "total: $((SECONDS - t0)) s" >>"$md"
rm -rf "$work"
cat "$md"
