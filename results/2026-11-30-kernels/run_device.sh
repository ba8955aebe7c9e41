#!/usr/bin/env bash
# Builds the kernels (only kernels/ + engine/diag,dtype: independent of the rest of the tree),
# runs the GPU tests and 'bench kernels' on the GPU machine; logs and tables go to $OUT.
# Usage (device tool): bash results/2026-11-30-kernels/run_device.sh [--quick]
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
B=build/gpu-kern
mkdir -p $B
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >"$OUT/gpu.txt" 2>&1
NV="nvcc -O3 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -lineinfo"
for f in nm_spmv nm_spmv_tc nm_autotune bench_util; do $NV -c kernels/$f.cu -o $B/$f.o & done
wait
CF="-std=c11 -O2 -g -D_GNU_SOURCE -DSD_HAVE_CUDA=1 -I. -I$CUDA_HOME/include -Wall -Wextra -Wno-unused-parameter"
LD="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcudart -lcublas -lstdc++ -lm -lpthread"
SRC="kernels/nm_format.c kernels/nm_spmv_cpu.c engine/diag.c engine/dtype.c"
printf '#include "kernels/bench_kernels.h"\nint main(int c, char **v) { return sd_bench_kernels(c - 1, v + 1); }\n' >$B/bench_main.c
{
    gcc $CF tests/kernels/test_spmv_gpu.c $SRC $B/nm_spmv.o $B/nm_spmv_tc.o $B/nm_autotune.o -o $B/test_spmv_gpu $LD &&
        gcc $CF $B/bench_main.c kernels/bench_kernels.c $SRC $B/*.o -o $B/bench $LD
} >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
echo "== GPU tests"
$B/test_spmv_gpu >"$OUT/test.log" 2>&1
tail -20 "$OUT/test.log"
echo "== bench kernels $*"
$B/bench kernels "$@" --out "$OUT/bench.md" 2>"$OUT/bench_cfg.log" | tee "$OUT/bench.log" >/dev/null
echo "bench rc=$?"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$OUT/gpu.txt" 2>&1
grep -E "^(- |Llama)" "$OUT/bench.md"
grep -E "Llama-3.1-8B \| [a-z_]+ \| 1 " "$OUT/bench.md"
