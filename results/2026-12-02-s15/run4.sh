#!/usr/bin/env bash
# results/2026-12-02-s15/run4.sh: the 2:4 sparse tensor-core kernel over 32 rows a block (cfg 27: x read once per 32 rows,
# two 16-row tiles per warp) and the wide one (26) with its x rows padded to 320 bytes (r3: 2-way
# bank conflicts).
# GPU tests; back-to-back timings of 26 / 25 / 24 / 128 / dense 16 on the 8B shapes at B = 1..64
# (prof_spmv); bench kernels --quick with and without the sparse tensor-core kernels; 8B decode
# 2:4 at batch 1, 4, 16, 64 with and without them (SD_NM_SP24), alternated twice, fresh tunings.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s15/run4.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_note "probe: $(grep 'sp24' "$R/test-spmv_gpu.log" | tr '\n' ' ')"
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 1 4 8 16 32 64; do
        for cfg in "2:4 27 1" "2:4 27 2" "2:4 25 1" "2:4 24 1" "2:4 26 1" "2:4 128 1" "dense 16 1"; do
            set -- $cfg
            [ $B -gt 16 ] && { [ $2 = 25 ] || [ $2 = 24 ] || [ $2 = 27 ] || [ $1 = dense ]; } && continue
            [ $B -lt 16 ] && { [ $2 = 26 ] || [ $2 = 128 ]; } && continue
            echo "$sh B=$B $1 rw=$2 split=$3: $(timeout 30 $P $1 $r $c $B $2 $3 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
ab_kernels sp build/gpu/sparsed --quick --batch 1,2,4,8,16
ab_kernels nosp build/gpu/sparsed --quick --batch 1,2,4,8,16 --no-sp24
ab_pack
for k in 1 2; do
    SD_NM_SP24=1 ab_decode sp-$k build/gpu/sparsed llama-3.1-8b dense,2:4 1,4,16,64
    SD_NM_SP24=0 ab_decode nosp-$k build/gpu/sparsed llama-3.1-8b 2:4 1,4,16,64
    ab_pack
done
