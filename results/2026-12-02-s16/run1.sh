#!/usr/bin/env bash
# results/2026-12-02-s16/run1.sh: the GEMM-shaped 2:4 sparse tensor-core kernels (cfg 29: 128 rows a
# block, 30: 256; kernels/nm_spmv_spg.cu), and the fifteenth session's moved GPU tests
# (test_sp24_gpu, the reshaped test_spmv_gpu), never run on a GPU before.
# Every GPU test binary; back-to-back timings of 29 / 30 against the kernels that take 8-64 vectors
# now (24, 27, 128; dense 16 up to 16) on the 8B shapes (prof_spmv); 8B decode 2:4 at batch 8, 16,
# 32, 64 with and without the sparse tensor-core kernels (SD_NM_SP24), alternated twice, fresh
# tunings (SD_TUNE_LOG: the picks in decode.log); dense at the same batches once.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s16/run1.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_sp24_gpu kernels/test_spmv_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu \
    engine/test_cuda_backend engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_note "sp24: $(grep -E 'sp24|spg|FAIL' "$R/test-test_sp24_gpu.log" | tr '\n' ' ')"
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 8 16 32 64; do
        for cfg in "2:4 29 1" "2:4 29 2" "2:4 29 4" "2:4 30 1" "2:4 30 2" "2:4 30 4" "2:4 128 1" "2:4 128 4" \
            "2:4 24 1" "2:4 27 1" "dense 16 1"; do
            set -- $cfg
            [ $B -gt 16 ] && { [ $2 = 24 ] || [ $2 = 27 ] || [ $1 = dense ]; } && continue
            [ $B -gt 8 ] && [ $2 = 27 ] && continue
            echo "$sh B=$B $1 rw=$2 split=$3: $(timeout 30 $P $1 $r $c $B $2 $3 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
export SD_TUNE_LOG=1
for k in 1 2; do
    SD_NM_SP24=1 ab_decode sp-$k build/gpu/sparsed llama-3.1-8b 2:4 8,16,32,64
    SD_NM_SP24=0 ab_decode nosp-$k build/gpu/sparsed llama-3.1-8b 2:4 8,16,32,64
    ab_pack
done
ab_decode dense build/gpu/sparsed llama-3.1-8b dense 8,16,32,64
ab_pack
