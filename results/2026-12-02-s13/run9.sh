#!/usr/bin/env bash
# results/2026-12-02-s13/run9.sh: 16:32 in the wide register-expanding kernel too (batches of 17-64;
# the whole-word layout read from its staged chunks): GPU test, memcheck, decode 16:32 at batch 16
# and 64 with SD_NM_TCX=2 (no 16:32 expansion: the tree before r8) against the default, alternated.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run9.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
for c in "16:32 1000 4224 40 128 1" "16:32 300 4288 64 128 2"; do
    timeout 60 compute-sanitizer --tool memcheck build/gpu/tools/prof_spmv $c 3 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck $c rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
done
ab_pack
for k in 1 2; do
    SD_NM_TCX=2 ab_decode notcx1632-$k "$NEW_BIN" llama-3.1-8b 16:32 16,64
    ab_decode tcx1632-$k "$NEW_BIN" llama-3.1-8b 16:32 16,64
    ab_pack
done
