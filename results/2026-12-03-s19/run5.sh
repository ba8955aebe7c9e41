#!/usr/bin/env bash
# results/2026-12-03-s19/run5.sh: the session's final tree (the gather kernels' lane-major x tile,
# their SwiGLU epilogue at batch 1): the SpMV, SwiGLU and engine GPU tests, then the 8B decode table
# of record (fresh tuning, context 512, every pattern, batch 1, 4, 16, 64).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s19/run5.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_pack
ab_decode rec-8b build/gpu/sparsed llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4,16,64
ab_note "done $(ab_el) s"
ab_pack
