#!/usr/bin/env bash
# results/2026-12-02-s15/run5.sh: the tree to commit (the 2:4 sparse tensor-core kernels 25 / 27
# among the autotuner's candidates for 1-8 vectors, the wide twin dropped): every GPU test binary,
# memcheck on the sparse tensor-core tests; 8B decode 2:4 at batch 1, 2, 4, 8, 16 with and without
# them (SD_NM_SP24), alternated twice, fresh tunings; the 8B decode table of record.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s15/run5.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend \
    engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_note "sp24: $(grep 'sp24' "$R/test-test_spmv_gpu.log" | tr '\n' ' ')"
timeout 300 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_swiglu_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck swiglu_gpu rc=$? $(tail -1 "$R/memcheck.log")"
ab_pack
for k in 1 2; do
    ab_decode sp-$k build/gpu/sparsed llama-3.1-8b 2:4 1,2,4,8,16
    SD_NM_SP24=0 ab_decode nosp-$k build/gpu/sparsed llama-3.1-8b 2:4 1,2,4,8,16
    ab_pack
done
ab_decode rec-8b build/gpu/sparsed llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4,16,64
ab_pack
