#!/usr/bin/env bash
# results/2026-12-02-s15/run6.sh: a third block shape for the 2:4 sparse tensor-core kernels: 64 rows
# as two groups of 32, 4 warps over K each (cfg 28: twice the K a warp walks, half the partial tiles
# to sum) beside 32 rows over 8 warps (27) and 16 (25). GPU tests; back-to-back timings on the 8B
# shapes at B = 1..16 (prof_spmv); 8B decode 2:4 at batch 1, 2, 4, 8 with and without the sparse
# tensor-core kernels (SD_NM_SP24), alternated twice, fresh tunings.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s15/run6.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_note "sp24: $(grep 'sp24' "$R/test-spmv_gpu.log" | tr '\n' ' ')"
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 1 2 4 8 16; do
        for cfg in "2:4 28 1" "2:4 28 2" "2:4 27 1" "2:4 25 1" "2:4 24 1" "dense 16 1"; do
            set -- $cfg
            echo "$sh B=$B $1 rw=$2 split=$3: $(timeout 30 $P $1 $r $c $B $2 $3 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
for k in 1 2; do
    ab_decode sp-$k build/gpu/sparsed llama-3.1-8b 2:4 1,2,4,8
    SD_NM_SP24=0 ab_decode nosp-$k build/gpu/sparsed llama-3.1-8b 2:4 1,2,4,8
    ab_pack
done
