#!/usr/bin/env bash
# results/2026-12-03-s19/run2.sh: the gather kernels' lane-major x tile (nm_spmv.cu x_word), now
# staged with a thread's four 16-byte loads issued at once and gathered through one-IMAD shared
# addresses (fma_col). r1 measured the layout alone (results/tmp/mid_prof_spmv here). GPU tests,
# memcheck of the gather configs; back-to-back timings of the gather kernels at 1-2 vectors, old
# (ebffe2e) / mid (r1) / new alternated twice; 8B decode of 4:8 / 8:16 / 16:32 at batch 1 and 2,
# dense and 2:4 at 1 as the control, old against new alternated twice, each process tuning afresh
# (the kernels' revision moved to 22: the old and new choices cannot share one cache).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s19/run2.sh
source tools/gpu_ab.sh
ab_build
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_note "spmv: $(grep -E 'spmv .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | head -8 | tr '\n' ' ')"
for t in gpu_8_16; do
    SD_TEST_ONLY=$t timeout 200 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
        >"$R/memcheck-$t.log" 2>&1
    ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
done
ab_pack
for k in 1 2; do
    ab_prof old-$k results/tmp/old_prof_spmv 4:8,8:16,16:32 1,2 "1:1 1:3 2:1 4:1"
    ab_prof mid-$k results/tmp/mid_prof_spmv 4:8,8:16,16:32 1,2 "1:1 1:3 2:1 4:1"
    ab_prof new-$k build/gpu/tools/prof_spmv 4:8,8:16,16:32 1,2 "1:1 1:3 2:1 4:1"
    ab_pack
done
for k in 1 2; do
    ab_decode old-$k results/tmp/old_sparsed llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,2
    ab_decode new-$k build/gpu/sparsed llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,2
    ab_pack
done
ab_note "done $(ab_el) s"
ab_pack
