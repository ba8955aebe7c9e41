#!/usr/bin/env bash
# tools/gpu/bisect_q32.sh: kernels/NOTES.md v17 "Next" 0 — is the Qwen3-32B / Llama-3.3-70B 2:4
# batch-1 slowdown since the ninth session (10.24 → 11.13 ms, 20.00 → 20.80) in the tree or in
# the machine lent? The ninth session's daemon against this one, alternated, one call, no build
# on the device. Here first (about 3 minutes each on 2 cores):
#   git worktree add results/tmp/snap9 db80aa7
#   make -C results/tmp/snap9 -j2 BUILD=build/gpu build/gpu/sparsed
#   make -j2 BUILD=build/gpu build/gpu/sparsed
# then on the device, with carry [".debs", "build/gpu/sparsed",
# "results/tmp/snap9/build/gpu/sparsed"]:
#   AB_PREBUILT=1 OLD=results/tmp/snap9 bash tools/gpu/bisect_q32.sh
# No tuning cache: the ninth session's daemon has none, so each run tunes at first use and the
# alternation (three rounds) has to show the spread. Copy into results/<date>/ to keep it there.
source tools/gpu_ab.sh
ab_build
for k in 1 2 3; do
    ab_decode old-q32-$k "$OLD_BIN" qwen3-32b dense,2:4 1
    ab_decode new-q32-$k "$NEW_BIN" qwen3-32b dense,2:4 1
    ab_pack
done
ab_decode old-70b "$OLD_BIN" llama-3.3-70b 2:4 1
ab_decode new-70b "$NEW_BIN" llama-3.3-70b 2:4 1
ab_decode old-8b "$OLD_BIN" llama-3.1-8b dense,2:4 1
ab_decode new-8b "$NEW_BIN" llama-3.1-8b dense,2:4 1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
