#!/usr/bin/env bash
# One GPU-machine session for the CUDA backend: build, GPU tests, decode benchmarks.
# Run from the repo root on the device machine with .debs carried; logs and tables go to $OUT.
#   bash results/2026-11-30-decode/gpu_run.sh [quick]
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source tools/device_env.sh
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
B=build/gpu
time make -k -j16 BUILD=$B all >"$OUT/build.log" 2>&1 || echo "make: some targets failed (see build.log)"
grep -E "error" "$OUT/build.log" | head -20
# Link the CUDA test and a bench driver from whatever compiled, so that another module's
# build break does not stop this run.
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CH=${NVCC%/bin/nvcc}
rm -f $B/cudalib.a
ar rcs $B/cudalib.a $(find $B/engine $B/kernels $B/prune $B/server -name '*.o' ! -name main.o 2>/dev/null)
LIBS="-L$CH/lib64 -Wl,-rpath,$CH/lib64 -ljansson -lmicrohttpd -luv -lpcre2-8 -lunistring -lm -lpthread -lcudart -lcublas -lcublasLt -lstdc++"
CF="-std=c11 -D_GNU_SOURCE -I. -O2 -g -pthread -DSD_HAVE_CUDA=1 -I$CH/include"
gcc $CF tests/engine/test_cuda_backend.c $B/cudalib.a -o $B/t_cuda $LIBS || exit 1
printf 'int sd_bench_decode_main(int, char **);\nint main(int c, char **v) { return sd_bench_decode_main(c - 1, v + 1); }\n' >/tmp/bd.c
gcc $CF /tmp/bd.c $B/cudalib.a -o $B/bench_decode $LIBS || exit 1
SD_SHARED_DIR=${SD_SHARED_DIR:-../shared} timeout 300 $B/t_cuda 2>&1 | tee "$OUT/test_cuda_backend.log"
P=config/presets
run() { timeout 240 $B/bench_decode decode "$@" 2>&1 | tee -a "$OUT/bench.log"; }
run --preset $P/llama-3.1-8b.json --pattern all --batch 1,4,16,64 --out "$OUT/llama-3.1-8b.md"
[ "${1:-}" = quick ] && exit 0
run --preset $P/qwen3-14b.json --pattern dense,2:4,8:16 --batch 1,16 --out "$OUT/qwen3-14b.md"
run --preset $P/qwen3-32b.json --pattern dense,2:4,8:16 --batch 1,16 --out "$OUT/qwen3-32b.md"
run --preset $P/llama-3.3-70b.json --pattern 2:4 --batch 1,16 --out "$OUT/llama-3.3-70b.md"
