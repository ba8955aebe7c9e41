#!/usr/bin/env bash
# results/2026-12-02-s16/run5.sh: the tree to commit: the GEMM-shaped 2:4 kernels as r3 ran them
# (r4's unit walk and stream-K twins dropped: slower), the wide register-expanding kernel's
# fixed-count copy loops from r4. Every GPU test binary, memcheck on the sparse tensor-core tests,
# the decode tables of record (tools/gpu_ab.sh ab_records' models).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s16/run5.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_sp24_gpu kernels/test_spmv_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu \
    engine/test_cuda_backend engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_note "sp24: $(grep -E 'worst|FAIL' "$R/test-test_sp24_gpu.log" | tr '\n' ' ')"
timeout 45 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_sp24_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck sp24_gpu rc=$? $(tail -1 "$R/memcheck.log")"
ab_pack
# ab_records' models, the largest last (the session's device time was short)
all=dense,2:4,4:8,8:16,16:32
ab_decode rec-8b build/gpu/sparsed llama-3.1-8b $all 1,4,16,64
ab_decode rec-70b build/gpu/sparsed llama-3.3-70b 2:4 1,4,16 512 200
ab_pack
ab_decode rec-q14 build/gpu/sparsed qwen3-14b $all 1,4,16,64 512 240
ab_pack
ab_decode rec-q32 build/gpu/sparsed qwen3-32b $all 1,4,16,64 512 240
ab_pack
