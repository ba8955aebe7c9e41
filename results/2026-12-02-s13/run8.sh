#!/usr/bin/env bash
# results/2026-12-02-s13/run8.sh: (1) 16:32 in the register-expanding tensor-core kernel (the
# whole-word layout, nm_tcx.h sd_tcx1632_expand): GPU test, memcheck, single-config timings at
# batch 4, 8, 16 on the 8B shapes against the shared-tile kernel it replaces there, decode with
# SD_NM_TCX=2 (the tree before for 16:32) against the default, alternated twice; (2) run7.sh's
# question: the refine pass with one pattern per process, plain and SD_TUNE_REFINE=1 alternated.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run8.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
P=build/gpu/tools/prof_spmv
for c in "16:32 1000 4224 4 24 1" "16:32 1000 4224 16 24 2" "16:32 37 4288 9 24 3"; do
    timeout 60 compute-sanitizer --tool memcheck $P $c 3 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck $c rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
done
ab_pack
for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
    set -- $shape
    for B in 4 8 16; do
        for rw in 24 16; do
            echo "$($P 16:32 $1 $2 $B $rw 1 300 2>&1 | tail -1)" >>"$R/prof.txt"
        done
        echo "$($P 8:16 $1 $2 $B 24 1 300 2>&1 | tail -1)" >>"$R/prof.txt"
    done
done
ab_note "prof $(ab_el) s"
ab_pack
for k in 1 2; do
    SD_NM_TCX=2 ab_decode notcx1632-$k "$NEW_BIN" llama-3.1-8b 16:32 1,4,16
    ab_decode tcx1632-$k "$NEW_BIN" llama-3.1-8b 16:32 1,4,16
    ab_pack
done
for k in 1 2; do
    for pat in dense 2:4 16:32; do
        ab_decode plain-$k "$NEW_BIN" llama-3.1-8b $pat 1
        SD_TUNE_REFINE=1 SD_TUNE_LOG=1 ab_decode refine-$k "$NEW_BIN" llama-3.1-8b $pat 1
    done
    ab_pack
done
grep "^refine:" "$R/decode.log" >"$R/refine.txt"
ab_pack
