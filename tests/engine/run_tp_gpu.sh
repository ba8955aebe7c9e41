#!/usr/bin/env bash
# The tensor-parallel GPU checks on a 2-GPU (or larger) machine: build, the single-GPU CUDA
# test (the TP edits must keep it passing), the TP test (threads and processes, 2 and, with 4
# GPUs, 4 ranks), then the decode benchmark on 1 and 2 GPUs. Logs go to $OUT.
# Run from the repo root on the device machine with .debs carried:
#   bash tests/engine/run_tp_gpu.sh [quick]
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source tools/device_env.sh
export NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv | tee "$OUT/gpu.txt"
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
B=build/gpu
time make -k -j32 BUILD=$B all >"$OUT/build.log" 2>&1 || echo "make: some targets failed (see build.log)"
grep -E "error|warning" "$OUT/build.log" | head -40
ls -la $B/sparsed $B/tests/engine/test_tp_gpu $B/tests/engine/test_cuda_backend 2>&1 | tee "$OUT/binaries.txt"
t() { # name, timeout
    echo "== $1" | tee -a "$OUT/summary.txt"
    timeout "$2" $B/tests/engine/$1 >"$OUT/$1.log" 2>&1
    echo "rc=$?" | tee -a "$OUT/summary.txt"
    tail -1 "$OUT/$1.log" | tee -a "$OUT/summary.txt"
}
t test_shard 120
t test_tp_bootstrap 120
t test_tp_gpu 540
t test_cuda_backend 300
[ "${1:-}" = quick ] && exit 0
t test_sched_cuda 300
P=config/presets
bench() { timeout 280 $B/sparsed bench decode "$@" >>"$OUT/bench.log" 2>&1; echo "bench $* rc=$?" | tee -a "$OUT/summary.txt"; }
bench --preset $P/llama-3.1-8b.json --pattern dense,2:4 --batch 1,16 --warmup 20 --steps 30 --out "$OUT/llama8b_tp1.md"
bench --preset $P/llama-3.1-8b.json --pattern dense,2:4 --batch 1,16 --warmup 20 --steps 30 --tensor-parallel 2 --out "$OUT/llama8b_tp2.md"
