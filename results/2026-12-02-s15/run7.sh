#!/usr/bin/env bash
# results/2026-12-02-s15/run7.sh: the GPU tests of the tensor-core kernels after their launch
# parameters moved into nm_tc.cuh (tc_params), and the decode tables of record for Qwen3-14B,
# Qwen3-32B and Llama-3.3-70B on that tree (the 2:4 sparse tensor-core kernels 25 / 27 among the
# candidates for 1-8 vectors, as e01fa68); 8B's is r5's.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s15/run7.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
ab_pack
all=dense,2:4,4:8,8:16,16:32
ab_decode rec-q14 build/gpu/sparsed qwen3-14b $all 1,4,16,64 512 240
ab_pack
ab_decode rec-q32 build/gpu/sparsed qwen3-32b $all 1,4,16,64 512 240
ab_pack
ab_decode rec-70b build/gpu/sparsed llama-3.3-70b 2:4 1,4,16 512 200
ab_pack
