#!/usr/bin/env bash
# results/2026-12-03-s18/run4.sh: the GPU tests on the session's final tree (71b7be9: the
# expansions' 8-byte table loads, the tuning caches' revision 21), memcheck on the 4:8 and 8:16
# expanding tests. No timings.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s18/run4.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu kernels/test_sp24_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu \
    engine/test_cuda_backend engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | head -8 | tr '\n' ' ')"
for t in tcx_4_8 tcx_8_16; do
    SD_TEST_ONLY=$t timeout 150 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
        >"$R/memcheck-$t.log" 2>&1
    ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
done
ab_pack
