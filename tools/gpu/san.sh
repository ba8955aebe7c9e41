#!/usr/bin/env bash
# GPU run of the "san" work, on one H200 (at most 8 minutes: 270 s + 2 x 90 s + set-up): the CUDA leak test
# (tests/loadtest/test_gpu_leak.py: 10 000 mixed requests, then device memory, KV blocks, fds and
# RSS back at baseline), then the steady-load scenario (Poisson rates up to and past saturation)
# on ../shared/models/small served dense and pruned to 2:4 (`sparsed serve` cannot serve
# synthetic weights, so the 8B shapes are left to `sparsed bench decode`).
# Run from the repo root after `source tools/device_env.sh && make -j32 BUILD=build/gpu all`.
# Writes $OUT/san.md (report) and $OUT/san.json (every sdload run and the leak summary).
set -uo pipefail
OUT=${OUT:-/tmp/out}
B=${B:-build/gpu}
mkdir -p "$OUT"
[[ -n ${C_INCLUDE_PATH:-} ]] || source tools/device_env.sh
source "$(dirname "$0")/lib.sh" # steady_load, steady_table
work=$(mktemp -d /tmp/san-gpu.XXXXXX)
md=$OUT/san.md
start=$SECONDS
{
    echo "# sparsed GPU leak test and load test ($(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null))"
    echo
    echo '```'
    nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv
    echo '```'
} >"$md"

# 1. The leak test (issue #4).
echo "== leak test" >&2
SD_BUILD=$B SD_GPU_LEAK_OUT=$work/leak timeout 270 python3 -m pytest -q -s -p no:cacheprovider \
    tests/loadtest/test_gpu_leak.py >"$work/leak.log" 2>&1
rc=$?
{
    echo
    echo "## CUDA leak test: tests/loadtest/test_gpu_leak.py (rc=$rc, $((SECONDS - start)) s)"
    echo
    echo '```'
    grep -vE '^\s*$' "$work/leak.log" | tail -40
    echo '```'
} >>"$md"
tail -5 "$work/leak.log" >&2

# 2. Steady load, dense vs 2:4, on the small model.
SMALL=${SMALL:-../shared/models/small}
if [[ -d $SMALL ]]; then
    $B/sparsed prune --model "$SMALL" --out "$work/small-2of4" --pattern 2:4 --solver magnitude --quiet \
        >"$work/prune.log" 2>&1 || { echo "prune failed" >>"$md"; cat "$work/prune.log" >>"$md"; }
    for v in dense 2of4; do
        model=$SMALL
        [[ $v == 2of4 ]] && model=$work/small-2of4
        [[ -d $model ]] || continue
        echo "== steady $v" >&2
        t0=$SECONDS
        RATES=${RATES:-16,32,64,128,256,inf} N=${N:-200} PORT=18181 OUTLEN=64 \
            steady_load "$work/steady-$v" "$model" 90 --timeout 120
        rc=$?
        {
            echo
            echo "## Steady load, small ($v; magnitude 2:4 for the sparse one), rc=$rc, $((SECONDS - t0)) s"
            echo
            echo "Poisson arrivals, 200 requests per rate, 128-token prompts, 64 output tokens (ignore_eos), streamed; max_seqs 64."
            echo
            steady_table "$work/steady-$v"
        } >>"$md"
    done
else
    echo "$SMALL absent: load test skipped" >>"$md"
fi

python3 - "$work" "$OUT/san.json" <<'PY'
import json, pathlib, sys
work, out = pathlib.Path(sys.argv[1]), sys.argv[2]
res = {"leak": {}, "steady": {}}
for p in sorted((work / "leak").glob("*.json")):
    res["leak"][p.stem] = json.loads(p.read_text())
for v in ("dense", "2of4"):
    p = work / f"steady-{v}" / "steady.json"
    if p.exists():
        res["steady"][v] = json.loads(p.read_text())
pathlib.Path(out).write_text(json.dumps(res))
PY
echo "total: $((SECONDS - start)) s" | tee -a "$md"
rm -rf "$work"
