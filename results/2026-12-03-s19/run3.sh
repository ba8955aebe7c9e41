#!/usr/bin/env bash
# results/2026-12-03-s19/run3.sh: the session's final kernels (the gather kernels' lane-major x
# tile, kernels revision 22): every GPU test binary, then the decode tables of record (the issue's
# protocol, context 512, fresh tunings): Llama-3.1-8B, Qwen3-14B, Qwen3-32B every pattern at batch
# 1, 4, 16, 64; Llama-3.3-70B 2:4 at 1, 4, 16.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s19/run3.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu kernels/test_sp24_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu \
    engine/test_cuda_backend engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_pack
ab_records build/gpu/sparsed
ab_note "done $(ab_el) s"
ab_pack
