#!/usr/bin/env bash
# The session's last GPU call, on the two-GPU machine (nvidia-h200-x2): build everything, run
# every GPU test (kernels, CUDA backend, scheduler on CUDA, tensor parallel), then the decode
# benchmark at TP=1 (all patterns) and TP=2. Logs and tables go to $OUT.
#   bash results/2026-11-30-final/run.sh      (from the repo root, .debs carried)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source tools/device_env.sh
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
nvidia-smi --query-gpu=index,name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
B=build/gpu
start=$(date +%s)
make -k -j32 BUILD=$B all >"$OUT/build.log" 2>&1 || echo "make: some targets failed (see build.log)"
echo "build: $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
grep -E "error" "$OUT/build.log" | head -20
t() { # test binary (dir/name), timeout
    echo "== $1" >>"$OUT/summary.txt"
    timeout "$2" $B/tests/$1 >"$OUT/$(basename $1).log" 2>&1
    echo "$1 rc=$? $(tail -1 "$OUT/$(basename $1).log")" | tee -a "$OUT/summary.txt"
}
t engine/test_cuda_backend 90
t kernels/test_spmv_gpu 90
t engine/test_tp_gpu 120
t engine/test_sched_cuda 60
P=config/presets
bench() {
    timeout "$1" $B/sparsed bench decode "${@:2}" >>"$OUT/bench.log" 2>&1
    echo "bench ${*:2} rc=$?" | tee -a "$OUT/summary.txt"
}
bench 150 --preset $P/llama-3.1-8b.json --pattern all --batch 1,4,16 --out "$OUT/llama8b_tp1.md"
bench 120 --preset $P/llama-3.1-8b.json --pattern dense,2:4 --batch 1,16 --tensor-parallel 2 --out "$OUT/llama8b_tp2.md"
echo "total: $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
