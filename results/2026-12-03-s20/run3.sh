#!/usr/bin/env bash
# results/2026-12-03-s20/run3.sh: the gather kernel's occupancy. ptxas gives it 64 registers at
# 1-2 vectors (4 blocks of 256 threads an SM: 50%), and ncu (s19 r7) found it latency-bound; built
# with __launch_bounds__(256, N) for 1-2 vectors, N = 3 (80 registers), 5 (48, 36-60 bytes of
# spills), 6 (40, 108-128 bytes), results/tmp/mbN_* (nm_spmv.cu compiled with
# -DSD_NM_GATHER_MINB=N over the tree's libsparsed.a). test_spmv_gpu of the tree (with the new
# test of corrupt masks on the gather kernels) and its memcheck; back-to-back timings of the
# gather configs at 1 and 2 vectors, the tree against each N, alternated twice; 8B decode of 8:16
# and 16:32 at batch 1 and 2, each binary tuned once and reused, alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s20/run3.sh
source tools/gpu_ab.sh
ab_build
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
SD_TEST_ONLY=gather_corrupt timeout 200 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
    >"$R/memcheck-gather_corrupt.log" 2>&1
ab_note "memcheck gather_corrupt rc=$? $(tail -1 "$R/memcheck-gather_corrupt.log")"
ab_pack
for k in 1 2; do
    for v in old mb3 mb5 mb6; do
        ab_prof $v-$k results/tmp/${v}_prof_spmv 8:16 1,2 "1:1 1:3 2:1 4:1"
    done
    ab_pack
done
for k in 1 2; do
    for v in old mb5 mb6; do
        AB_DECODE_ARGS="--tune-cache $R/tune-$v.json" ab_decode $v-$k results/tmp/${v}_sparsed llama-3.1-8b \
            8:16,16:32 1,2
    done
    ab_pack
done
ab_note "done $(ab_el) s"
ab_pack
