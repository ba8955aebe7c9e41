#!/usr/bin/env bash
# results/2026-12-03-s18/run3.sh: the 4:8 / 8:16 expansions' table entries in one 8-byte shared
# load (nm_tcx.h sd_tcx_entry2) instead of two 4-byte ones (PTX of the wide kernel at 16 vectors:
# 4:8 36 -> 20 shared loads a step and lane, 8:16 64 -> 36). test_spmv_gpu and test_swiglu_gpu;
# back-to-back timings of the expanding kernels (24 / 128 / 256) on the 8B shapes, old (6841e63:
# results/tmp/old_*) against new alternated twice; 8B decode 4:8 / 8:16 (16:32 as a control:
# its table is unchanged) at batch 4, 16, 64, old against new, alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s18/run3.sh
source tools/gpu_ab.sh
ab_build
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test test_swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | head -8 | tr '\n' ' ')"
ab_pack
for k in 1 2; do
    for side in old new; do
        P=build/gpu/tools/prof_spmv
        [ $side = old ] && P=results/tmp/old_prof_spmv
        for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
            r=${sh%:*} c=${sh#*:}
            for pat in 4:8 8:16 16:32; do
                for cfg in "4 24 1" "4 24 4" "16 24 1" "16 128 1" "16 128 4" "16 256 1" "64 128 4" "64 256 1"; do
                    set -- $cfg
                    echo "$side-$k $sh B=$1 $pat rw=$2 split=$3: $(timeout 30 $P $pat $r $c $1 $2 $3 100 2>&1 | tail -1)" >>"$R/prof.txt"
                done
            done
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
for k in 1 2; do
    ab_decode old-$k results/tmp/old_sparsed llama-3.1-8b 4:8,8:16,16:32 4,16,64
    ab_decode new-$k build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 4,16,64
    ab_pack
done
ab_note "done $(ab_el) s"
ab_pack
