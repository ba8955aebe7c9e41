#!/usr/bin/env bash
# run_table.sh: our version of the paper's Tables 1-2 and 8 on the bundled `small` model —
# SparseGPT with decode-aware calibration (dense greedy generations from prune/prompts, decode
# rows only) against teacher-forced text calibration (tests/fixtures/prune/calib_stdlib.txt) at
# the same token budget, for 2:4, 8:16 and unstructured 50%, plus a magnitude baseline, judged
# by perplexity on held-out text and by KL(dense || pruned) / greedy agreement along the dense
# model's own continuations of separate prompts.
#
#   prune/experiments/run_table.sh [OUT_DIR]     (default results/2026-11-30-pruning)
# Environment: SPARSED (binary, default build/sparsed), MODEL (default ../shared/models/small),
# BUDGET (calibration tokens, 4096), PATTERNS ("2:4 8:16 unstructured"), THREADS (2),
# PPL_TOKENS (2048), GEN_TOKENS (48), EXTRA (0; 1: also sequential-mode and Wanda rows at 2:4).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/2026-11-30-pruning}
SPARSED=${SPARSED:-build/sparsed}
MODEL=${MODEL:-../shared/models/small}
BUDGET=${BUDGET:-4096}
PATTERNS=${PATTERNS:-"2:4 8:16 unstructured"}
THREADS=${THREADS:-2}
PPL_TOKENS=${PPL_TOKENS:-2048}
GEN_TOKENS=${GEN_TOKENS:-48}
EXTRA=${EXTRA:-0}
PROMPTS=prune/prompts/calib_code_prose.jsonl
TEXT=tests/fixtures/prune/calib_stdlib.txt
EVAL_TEXT=tests/fixtures/prune/heldout_stdlib_tests.txt
EVAL_PROMPTS=prune/prompts/eval_code_prose.jsonl
WORK=$(mktemp -d /tmp/sd_table.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
RAW="$OUT/raw.jsonl"
: >"$RAW"

evaluate() { # name model extra-json [no-fidelity]
    local fid=(--ref "$MODEL" --prompts "$EVAL_PROMPTS" --gen-tokens "$GEN_TOKENS")
    [[ ${4:-} = no-fidelity ]] && fid=()
    "$SPARSED" eval --model "$2" --text "$EVAL_TEXT" --max-tokens "$PPL_TOKENS" "${fid[@]}" \
        --threads "$THREADS" 2>/dev/null |
        python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); r.update(json.loads(sys.argv[1])); print(json.dumps(r))' "$3" >>"$RAW"
    tail -n 1 "$RAW"
}

run() { # name pattern solver source mode
    local name=$1 pattern=$2 solver=$3 source=$4 mode=$5 dir="$WORK/$1" input=()
    case $source in
    decode) input=(--source decode --prompts "$PROMPTS" --max-new-tokens $((BUDGET / 64 > 256 ? 256 : BUDGET / 64))) ;;
    text) input=(--source text --text "$TEXT" --seq-len 512) ;;
    none) input=() ;;
    esac
    local t0=$SECONDS
    "$SPARSED" prune --model "$MODEL" --out "$dir" --pattern "$pattern" --solver "$solver" --mode "$mode" \
        --tokens-budget "$BUDGET" --threads "$THREADS" --quiet "${input[@]}" >"$OUT/$name.prune.log" 2>&1
    cp "$dir/sparsity.json" "$OUT/$name.sparsity.json"
    local tokens
    tokens=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["provenance"]["calibration_tokens"])' "$dir/sparsity.json")
    evaluate "$name" "$dir" "{\"name\": \"$name\", \"pattern\": \"$pattern\", \"solver\": \"$solver\", \"source\": \"$source\", \"mode\": \"$mode\", \"calib_tokens\": $tokens, \"prune_s\": $((SECONDS - t0))}"
    rm -rf "$dir"
}

# the dense model against itself is KL 0 and agreement 1 by definition: only its perplexity is run
evaluate dense "$MODEL" '{"name": "dense", "pattern": "dense", "solver": "-", "source": "-", "mode": "-", "calib_tokens": 0, "kl": 0.0, "agree": 1.0}' no-fidelity
for p in $PATTERNS; do
    tag=${p/:/-}
    run "sgpt-decode-$tag" "$p" sparsegpt decode oneshot
    run "sgpt-text-$tag" "$p" sparsegpt text oneshot
done
run "magnitude-2-4" 2:4 magnitude none oneshot
if [[ $EXTRA = 1 ]]; then
    run "sgpt-decode-seq-2-4" 2:4 sparsegpt decode sequential
    run "wanda-decode-2-4" 2:4 wanda decode oneshot
    run "wanda-text-2-4" 2:4 wanda text oneshot
fi

python3 - "$RAW" "$OUT/table.md" "$BUDGET" "$PPL_TOKENS" "$GEN_TOKENS" "$MODEL" <<'PY'
import json, sys
raw, out, budget, ppl_tokens, gen_tokens, model = sys.argv[1:]
rows = [json.loads(l) for l in open(raw)]
lines = [f"Model `{model}`; calibration budget {budget} tokens; perplexity on the first {ppl_tokens} tokens of "
         "`tests/fixtures/prune/heldout_stdlib_tests.txt` (stdlib test files, held out from training); KL and "
         f"agreement along {gen_tokens}-token greedy continuations by the dense model of the prompts in "
         "`prune/prompts/eval_code_prose.jsonl`.", "",
         "| pattern | solver | calibration | mode | calib tokens | ppl (held-out) | KL(dense‖pruned) nats/token | greedy agreement |",
         "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
for r in rows:
    lines.append(f"| {r['pattern']} | {r['solver']} | {r['source']} | {r['mode']} | {r['calib_tokens']} | "
                 f"{r['ppl']:.3f} | {r['kl']:.4f} | {100 * r['agree']:.1f}% |")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
