#!/usr/bin/env bash
# results/2026-12-02-s13/run3.sh: the 4:8 compacting kernel (kernels/nm_c48.h; the c24 kernel's
# structure with a byte-indexed selector table in shared memory). GPU test (every config against
# the fp64 twin, fallbacks, corrupt masks), memcheck, then single-config timings at batch 1 and 2
# on the 8B shapes beside the kernels the autotuner picked for 4:8 before (r1), and decode with
# SD_NM_C24=1 (2:4 only, the tree before) against the default (2:4 and 4:8), alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run3.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
P=build/gpu/tools/prof_spmv
for c in "4:8 1000 4224 1 101 1" "4:8 1000 4224 1 102 3" "4:8 1000 4224 1 103 1" "4:8 1000 4224 2 101 1"; do
    timeout 60 compute-sanitizer --tool memcheck $P $c 3 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck $c rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
done
ab_pack
prof() { echo "$($P "$@" 300 2>&1 | tail -1)" >>"$R/prof.txt"; }
for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
    set -- $shape
    prof 2:4 $1 $2 1 103 1
    for rw in 101 102 103; do prof 4:8 $1 $2 1 $rw 1; done
    for sp in 2 4; do prof 4:8 $1 $2 1 103 $sp; prof 4:8 $1 $2 1 101 $sp; done
    prof 4:8 $1 $2 1 1 1
    prof 4:8 $1 $2 1 32 1
    prof 4:8 $1 $2 1 2 2
    prof 4:8 $1 $2 1 32 2
    for rw in 101 103; do prof 4:8 $1 $2 2 $rw 1; done
    prof 4:8 $1 $2 2 32 1
    prof 2:4 $1 $2 2 103 1
done
ab_note "prof $(ab_el) s"
ab_pack
for k in 1 2; do
    SD_NM_C24=1 ab_decode c24only-$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8 1,2,4
    ab_decode c48-$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8 1,2,4
    ab_pack
done
SD_TUNE_LOG=1 ab_decode tunelog "$NEW_BIN" llama-3.1-8b 4:8 1,2
grep "^tune:" "$R/decode.log" >"$R/tune.txt"
ab_pack
