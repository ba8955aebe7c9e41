#!/usr/bin/env bash
# results/2026-12-05-s32/r1/run.sh (was tools/gpu/s32_check.sh): one device call for the thirty-second session — the draft model on the
# CUDA backend (tools/gpu/spec_check3.sh: test_spec, test_sched_cuda's draft-model check, bench
# spec with and without --draft-model, the daemon with --spec-draft-model), test_prefix, then the
# prefix cache's adaptive insertion under GPU load: the thirtieth session's r6 (16 prefixes of
# 1024 tokens taken in turn, a pool of 1000 blocks, where LRU hit 0%) rerun.
# Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_spec \
#       build/gpu/tests/engine/test_sched_cuda build/gpu/tests/engine/test_prefix
# then on the device (carry .debs, results/tmp): bash results/2026-12-05-s32/r1/run.sh
set -u
tar xJf results/tmp/bins.tar.xz
base=$OUT
build/gpu/tests/engine/test_prefix >"$base/test_prefix.log" 2>&1
echo "test_prefix rc=$?: $(tail -1 "$base/test_prefix.log")" | tee "$base/summary.txt"
mkdir -p "$base/spec" "$base/prefix"
OUT=$base/spec AB_WORK=/tmp/ab-spec AB_PREBUILT=1 AB_LIMIT_S=300 bash tools/gpu/spec_check3.sh
echo "spec_check3 rc=$?" | tee -a "$base/summary.txt"
OUT=$base/prefix AB_WORK=/tmp/ab-prefix AB_PREBUILT=1 AB_LIMIT_S=280 KV_BLOCKS=1000 NPRE=16 CACHES=true \
    RATES=8,32 N=160 timeout 280 bash tools/gpu/prefix_load.sh
echo "prefix_load rc=$?" | tee -a "$base/summary.txt"
for d in spec prefix; do
    tar xzf "$base/$d/r.tgz" -C "$base/$d" 2>/dev/null && cat "$base/$d/r/summary.txt" >>"$base/summary.txt"
done
cat "$base/summary.txt"
