#!/usr/bin/env bash
# results/2026-12-03-s17/run3.sh: the tree to commit: r2's 4 steps in flight for 2:4 / 4:8 / 8:16
# at 128 rows a block, 16:32 kept at 3 (r2: slower deep). test_spmv_gpu, memcheck on the 16:32 and
# 4:8 expanding tests, one 8B decode of 4:8 / 16:32 at batch 16 (a sanity check beside r2, not an A/B).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s17/run3.sh
source tools/gpu_ab.sh
ab_build
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | tr '\n' ' ')"
for t in tcx_16_32 tcx_4_8; do
    SD_TEST_ONLY=$t timeout 120 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
        >"$R/memcheck-$t.log" 2>&1
    ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
done
ab_pack
ab_decode new-1 build/gpu/sparsed llama-3.1-8b 4:8,16:32 16
ab_pack
