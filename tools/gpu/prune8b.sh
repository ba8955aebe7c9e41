#!/usr/bin/env bash
# tools/gpu/prune8b.sh: SparseGPT 2:4 of a whole Llama-3.1-8B-shape model on one H200 (issue #7:
# "the CUDA path prunes a synthetic 8B-shape model layer by layer within the memory of one H200;
# the time per layer is reported"). Run from the repo root after
#   source tools/device_env.sh && make -j32 BUILD=build/gpu all
# with the Llama-3 tokenizer at $TOK (default ../shared/tokenizers/llama3; carry a copy, see
# tools/gpu/load8b.sh). Random weights from tools/synth_ckpt.py, decode calibration from the
# bundled prompts (generation and capture on the GPU), one-shot and sequential modes.
# Writes $OUT/prune8b.md: wall time per mode, per layer, and the peak GPU memory seen.
# PRESET=models/tiny/config.json TOK=models/tiny DEVICE=cpu is a dry run anywhere.
set -uo pipefail
OUT=${OUT:-/tmp/out}
B=${B:-build/gpu}
TOK=${TOK:-../shared/tokenizers/llama3}
PRESET=${PRESET:-config/presets/llama-3.1-8b.json}
DEVICE=${DEVICE:-cuda}
BUDGET=${BUDGET:-8192} # calibration tokens
MODES=${MODES:-oneshot sequential}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/prune8b.XXXXXX)
rm -f "$OUT/prune8b-layers.txt"
md=$OUT/prune8b.md
layers=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['num_hidden_layers'])" "$PRESET")
t0=$SECONDS
python3 tools/synth_ckpt.py --config "$PRESET" --tokenizer "$TOK" --out "$work/dense" >"$work/synth.log" 2>&1 ||
    { cat "$work/synth.log"; exit 1; }
{
    echo "# SparseGPT 2:4 of $(basename "$PRESET" .json) shapes (random weights), --device $DEVICE"
    echo
    echo "- date: $(date -u +%FT%TZ); GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
    echo "- command: \`bash tools/gpu/prune8b.sh\` (decode calibration, $BUDGET tokens, prune/prompts/calib_code_prose.jsonl)"
    echo "- synthetic checkpoint: $((SECONDS - t0)) s"
    echo
    echo "| mode | wall s | s per layer ($layers layers) | peak GPU memory MiB | rc |"
    echo "| --- | ---: | ---: | ---: | ---: |"
} >"$md"
for mode in $MODES; do
    peak=0
    t1=$SECONDS
    $B/sparsed prune --model "$work/dense" --out "$work/p-$mode" --pattern 2:4 --solver sparsegpt --mode "$mode" \
        --device "$DEVICE" --source decode --prompts prune/prompts/calib_code_prose.jsonl --tokens-budget "$BUDGET" \
        --max-new-tokens 128 >"$OUT/prune8b-$mode.log" 2>&1 &
    pid=$!
    while kill -0 $pid 2>/dev/null; do # the peak of the device's used memory while it runs
        m=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
        [[ ${m:-0} -gt $peak ]] && peak=$m
        sleep 1
    done
    wait $pid
    rc=$?
    s=$((SECONDS - t1))
    echo "| $mode | $s | $(python3 -c "print(f'{$s / $layers:.2f}')") | $peak | $rc |" >>"$md"
    tail -3 "$OUT/prune8b-$mode.log" | sed 's/^/    /' >>"$work/tails.txt"
    { # the per-layer lines sparsed prune prints ("layer i/n solved in Xs")
        echo
        echo "$mode, seconds per layer (capture included in sequential mode):"
        echo
        grep -o 'layer [0-9]*/[0-9]* solved in [0-9.]*s' "$OUT/prune8b-$mode.log" | awk '{print $2, $5}' |
            python3 -c 'import sys, statistics as st
r = [(l.split()[0].split("/")[0], float(l.split()[1].rstrip("s"))) for l in sys.stdin if l.strip()]
t = [x[1] for x in r]
print("    " + " ".join(f"{i}:{x:.2f}" for i, x in r) if r else "    (no per-layer lines)")
if t:
    print(f"    min {min(t):.2f} s, median {st.median(t):.2f} s, max {max(t):.2f} s, sum {sum(t):.1f} s")'
    } >>"$OUT/prune8b-layers.txt"
done
{ cat "$OUT/prune8b-layers.txt"; echo; echo "Last lines of each log:"; echo; cat "$work/tails.txt"; } >>"$md"
rm -rf "$work"
cat "$md"
