#!/usr/bin/env bash
# Builds kernels/ alone, runs test_spmv_gpu and bench_rows (old vs row-per-lane SpMV, 8B shapes,
# 4 patterns, B = 1, 2, 4), then a short ncu look at one launch of each; logs go to $OUT.
# Usage (device tool, repo root): bash results/2026-11-30-kernels/run_rows.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
B=build/gpu-rows
mkdir -p $B
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv >"$OUT/gpu.txt" 2>&1
NV="nvcc -O3 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -lineinfo"
# PRE: objects built with the same nvcc line on the development machine (carried), else build here.
PRE=${PRE:-build/kopt/dev}
if [ -f $PRE/nm_spmv_rows.o ]; then
    cp $PRE/*.o $B/
else
    for f in nm_spmv nm_spmv_tc nm_spmv_rows nm_autotune bench_util; do $NV -c kernels/$f.cu -o $B/$f.o & done
    wait
fi
CF="-std=c11 -O2 -g -D_GNU_SOURCE -DSD_HAVE_CUDA=1 -I. -I$CUDA_HOME/include -Wall -Wextra -Wno-unused-parameter"
LD="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcudart -lstdc++ -lm -lpthread"
SRC="kernels/nm_format.c kernels/nm_spmv_cpu.c engine/diag.c engine/dtype.c"
OBJ="$B/nm_spmv.o $B/nm_spmv_tc.o $B/nm_spmv_rows.o $B/nm_autotune.o"
{
    gcc $CF tests/kernels/test_spmv_gpu.c $SRC $OBJ -o $B/test_spmv_gpu $LD &&
        gcc $CF results/2026-11-30-kernels/bench_rows.c $SRC $OBJ $B/bench_util.o -o $B/bench_rows $LD
} >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
echo "== GPU tests"
timeout 75 $B/test_spmv_gpu >"$OUT/test.log" 2>&1
echo "test rc=$?"
grep -E "^(FAIL|  FAIL|ok|  rows|  spmv)|passed" "$OUT/test.log" | tail -30
echo "== bench_rows"
timeout 75 $B/bench_rows "$OUT/bench_rows.md" 2>"$OUT/bench_rows_cfg.log"
echo "bench rc=$?"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$OUT/gpu.txt" 2>&1
export PATH=$PATH:$CUDA_HOME/bin:/usr/local/cuda/bin
if command -v compute-sanitizer >/dev/null; then
    timeout 25 compute-sanitizer --tool memcheck $B/bench_rows --one >"$OUT/memcheck.txt" 2>&1
    echo "memcheck rc=$?"
    tail -3 "$OUT/memcheck.txt"
fi
if command -v ncu >/dev/null; then
    timeout 30 ncu --clock-control none --kernel-name regex:"rows_kernel|rows_sk_kernel|nm_spmv_kernel" \
        --launch-count 8 --metrics gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active $B/bench_rows --one >"$OUT/ncu.txt" 2>&1
    echo "ncu rc=$?"
fi
