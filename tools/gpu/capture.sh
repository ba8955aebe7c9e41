#!/usr/bin/env bash
# tools/gpu/capture.sh: calibration capture on the CUDA backend (issue #7), against build/gpu
# (built by the caller: `source tools/device_env.sh && make -j32 BUILD=build/gpu all`). Run
# from the repo root:  bash tools/gpu/capture.sh
# test_capture_cuda on models/tiny: every layer's four Hessians captured on the GPU against the
# CPU capture of the same sequences (relative Frobenius < 2e-2), then whole `--device cuda`
# one-shot prunes (decode and tokens sources) against SD_PRUNE_CPU_CAPTURE=1 jobs: loadable 2:4,
# >= 90% of the 2:4 groups with the same mask, KL to the dense model within 15% (25% when the
# GPU generated other sequences; the test explains the bounds). Under a minute. Writes $OUT/capture.log (the test's output)
# and $OUT/capture-summary.txt (exit status and the last line).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-build/gpu}
LOG="$OUT/capture.log"
SUM="$OUT/capture-summary.txt"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >"$LOG" 2>&1
echo "cpu cores: $(nproc)" >>"$LOG"
start=$(date +%s)
timeout 55 "$B/tests/prune/test_capture_cuda" >>"$LOG" 2>&1
rc=$?
# on the GPU machine a skip means the GPU parts did not run: that is a failure here
if [ $rc = 0 ] && command -v nvidia-smi >/dev/null && grep -q "SKIP" "$LOG"; then
    echo "GPU present but tests skipped" >>"$LOG"
    rc=3
fi
echo "test_capture_cuda rc=$rc ($(($(date +%s) - start)) s): $(tail -n 1 "$LOG")" | tee "$SUM"
exit $rc
