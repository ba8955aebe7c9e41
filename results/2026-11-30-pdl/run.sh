#!/usr/bin/env bash
# Programmatic dependent launch (kernels/pdl.cuh), measured on one H200: build, the GPU tests,
# then the same benchmarks with PDL on and off side by side — kernels (8B shapes, graph of 20
# launches) and end-to-end decode (synthetic Llama-3.1-8B, dense and 2:4).
#   bash results/2026-11-30-pdl/run.sh      (from the repo root, .debs carried)
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/r
mkdir -p "$R"
source tools/device_env.sh
nvidia-smi --query-gpu=index,name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$R/gpu.txt"
B=build/gpu
start=$(date +%s)
make -k -j32 BUILD=$B all >"$R/build.log" 2>&1 || echo "make: some targets failed (see build.log)"
echo "build: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
grep -E "error" "$R/build.log" | head -20
t() { # test binary (dir/name), timeout
    timeout "$2" $B/tests/$1 >"$R/$(basename $1).log" 2>&1
    echo "$1 rc=$? $(tail -1 "$R/$(basename $1).log")" | tee -a "$OUT/summary.txt"
}
t kernels/test_spmv_gpu 120
t engine/test_cuda_backend 120
t engine/test_sched_cuda 60
$B/sparsed bench kernels --quick --out "$R/kern_pdl.md" >/dev/null 2>"$R/kern_pdl.err"
$B/sparsed bench kernels --quick --no-pdl --out "$R/kern_nopdl.md" >/dev/null 2>"$R/kern_nopdl.err"
echo "kernels: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
P=config/presets/llama-3.1-8b.json
for pdl in 1 0; do
    SD_PDL=$pdl timeout 200 $B/sparsed bench decode --preset $P --pattern dense,2:4,16:32 --batch 1,16 \
        --out "$R/decode_pdl$pdl.md" >>"$R/decode.log" 2>&1
    echo "decode SD_PDL=$pdl rc=$?" | tee -a "$OUT/summary.txt"
done
echo "total: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
tar czf "$OUT/r.tgz" -C "$OUT" r
