#!/usr/bin/env bash
# results/2026-12-03-s20/run1.sh: the gather kernel's bit scan in two chains of 8 (nm_spmv.cu
# nm_word: values 15..8 from the top of the mask word, 0..7 from the top of its reverse, two
# accumulators; kernels/NOTES.md v25 "Next" 1). Every GPU test, memcheck of the gather configs;
# back-to-back timings of the gather kernel (rows a warp 1/2/4, splits) at 1, 2 and 4 vectors,
# old (fd75e80, results/tmp/old_*) against new alternated twice, and the register-expanding /
# row-per-lane configs at 4 vectors for reference; 8B decode at batch 1, 2 and 4, old against new
# alternated twice, each binary tuning once and reusing its tuning (kernels revision 22 -> 23).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s20/run1.sh
source tools/gpu_ab.sh
ab_build
ab_gpu_tests
for t in gpu_8_16 gather_corrupt; do
    SD_TEST_ONLY=$t timeout 200 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
        >"$R/memcheck-$t.log" 2>&1
    ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
done
ab_pack
for k in 1 2; do
    ab_prof old-$k results/tmp/old_prof_spmv 8:16,16:32 1,2,4 "1:1 1:3 2:1 4:1"
    ab_prof new-$k build/gpu/tools/prof_spmv 8:16,16:32 1,2,4 "1:1 1:3 2:1 4:1"
    ab_pack
done
ab_prof ref-4 build/gpu/tools/prof_spmv 8:16,16:32 4 "24:1 24:2 32:1"
for k in 1 2; do # round 1 tunes and saves; round 2 reuses each binary's own tuning
    AB_DECODE_ARGS="--tune-cache $R/tune-old.json" ab_decode old-$k results/tmp/old_sparsed llama-3.1-8b \
        dense,4:8,8:16,16:32 1,2,4
    AB_DECODE_ARGS="--tune-cache $R/tune-new.json" ab_decode new-$k build/gpu/sparsed llama-3.1-8b \
        dense,4:8,8:16,16:32 1,2,4
    ab_pack
done
ab_note "done $(ab_el) s"
ab_pack
