#!/usr/bin/env bash
# The session's last GPU call (two H200s, ~4 minutes of device time left): build, then, most
# important first, each under its own timeout and the whole under ~210 s:
#   1. tools/gpu/tpkill.sh        a follower killed mid-decode (issue #6)
#   2. test_gpu_leak.py           10 000 mixed requests, device memory back to baseline (issue #4)
#   3. tools/gpu/capture.sh       calibration capture on the CUDA backend (issue #7)
#   4. tools/gpu/prefill.sh       tiled prefill attention (issue #4), if time is left
# Every step writes under $OUT/r as it goes, so a cut run still returns what it did.
#   bash results/2026-11-30-gpu-last/run.sh      (from the repo root, .debs carried)
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/r
mkdir -p "$R"
source tools/device_env.sh
export SD_BUILD=build/gpu NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
make -j32 BUILD=build/gpu all >"$R/build.log" 2>&1
echo "build rc=$? $(el) s" | tee -a "$R/summary.txt"
OUT=$R timeout 62 bash tools/gpu/tpkill.sh >/dev/null 2>&1
echo "tpkill rc=$? $(el) s" | tee -a "$R/summary.txt"
cat "$R/tpkill-summary.txt" >>"$R/summary.txt" 2>/dev/null
timeout 80 python3 -m pytest -q -x -p no:cacheprovider -s tests/loadtest/test_gpu_leak.py >"$R/leak.log" 2>&1
echo "leak rc=$? $(el) s: $(grep -E 'after [0-9]+ requests|passed|failed' "$R/leak.log" | tail -2 | tr '\n' ' ')" |
    tee -a "$R/summary.txt"
OUT=$R timeout 50 bash tools/gpu/capture.sh >/dev/null 2>&1
echo "capture rc=$? $(el) s" | tee -a "$R/summary.txt"
cat "$R/capture-summary.txt" >>"$R/summary.txt" 2>/dev/null
if [ "$(el)" -lt 160 ]; then
    OUT=$R timeout $((205 - $(el))) bash tools/gpu/prefill.sh >/dev/null 2>&1
    echo "prefill rc=$? $(el) s" | tee -a "$R/summary.txt"
    cat "$R/prefill-summary.txt" >>"$R/summary.txt" 2>/dev/null
fi
tar czf "$OUT/r.tgz" -C "$OUT" r
