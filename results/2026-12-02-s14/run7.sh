#!/usr/bin/env bash
# results/2026-12-02-s14/run7.sh: the session's last tree: every GPU test binary, memcheck of the
# row-per-lane SwiGLU configs, and the decode tables of record (tools/gpu_ab.sh ab_records).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s14/run7.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend \
    engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "$(basename $t)" build/gpu/tests/$t 300
done
ab_pack
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_records "$NEW_BIN"
