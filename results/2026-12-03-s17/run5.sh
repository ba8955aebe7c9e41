#!/usr/bin/env bash
# results/2026-12-03-s17/run5.sh: after the review's refactor (the wide kernel and its shared memory
# from one dispatch, WideKernel): test_spmv_gpu, test_swiglu_gpu (the wide kernels' SwiGLU refusal),
# memcheck on the 16:32 and 4:8 expanding tests. No timings: the kernels' code is unchanged.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s17/run5.sh
source tools/gpu_ab.sh
ab_build
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test test_swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | tr '\n' ' ')"
for t in tcx_16_32 tcx_4_8; do
    SD_TEST_ONLY=$t timeout 120 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
        >"$R/memcheck-$t.log" 2>&1
    ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
done
ab_pack
