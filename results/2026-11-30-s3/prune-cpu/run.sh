#!/usr/bin/env bash
# Magnitude 2:4 prune of a 4-layer Llama-3.1-8B-shape random checkpoint on the CPU, the tree
# before the prune speed-up (003f64c) against HEAD, alternated in one run; wall time and peak
# RSS from /usr/bin/time, and a byte comparison of the outputs.
#   bash results/2026-11-30-s3/prune-cpu/run.sh > results/2026-11-30-s3/prune-cpu/README.md
set -euo pipefail
OLD_REV=${OLD_REV:-003f64c}
W=$(mktemp -d /tmp/prunecpu.XXXXXX)
git worktree add -q "$W/old" "$OLD_REV"
make -s -j2 -C "$W/old" BUILD=build CUDA=0 build/sparsed >/dev/null
make -s -j2 BUILD=build-prunecpu CUDA=0 build-prunecpu/sparsed >/dev/null
python3 - "$W/cfg.json" <<'PY'
import json, sys
c = json.load(open("config/presets/llama-3.1-8b.json"))
c["num_hidden_layers"] = 4
json.dump(c, open(sys.argv[1], "w"))
PY
python3 tools/synth_ckpt.py --config "$W/cfg.json" --tokenizer models/tiny --out "$W/dense" >/dev/null 2>&1
echo "# Magnitude 2:4 prune on the CPU, before and after the prune speed-up"
echo
echo "- date: $(date -u +%FT%TZ); machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- command: \`bash results/2026-11-30-s3/prune-cpu/run.sh\`; checkpoint: config/presets/llama-3.1-8b.json with 4 layers, random weights (tools/synth_ckpt.py), $(du -sh "$W/dense" | cut -f1)"
echo "- each: \`sparsed prune --model DENSE --out OUT --pattern 2:4 --solver magnitude --threads 2 --quiet\`, old ($OLD_REV) and new ($(git rev-parse --short HEAD)) alternated twice"
echo
echo "| binary | run | wall s | peak RSS MB |"
echo "| --- | ---: | ---: | ---: |"
for run in 1 2; do
    for v in old new; do
        bin=$W/old/build/sparsed
        [ $v = new ] && bin=build-prunecpu/sparsed
        rm -rf "$W/out-$v"
        /usr/bin/time -f "%e %M" -o "$W/time" "$bin" prune --model "$W/dense" --out "$W/out-$v" --pattern 2:4 \
            --solver magnitude --threads 2 --quiet >/dev/null
        read -r wall rss <"$W/time"
        echo "| $v | $run | $wall | $((rss / 1024)) |"
    done
done
echo
if cmp -s "$W/out-old/model.safetensors" "$W/out-new/model.safetensors"; then
    echo "model.safetensors: identical bytes."
else
    echo "model.safetensors: DIFFERENT."
fi
git worktree remove --force "$W/old"
rm -rf "$W" build-prunecpu
