#!/usr/bin/env bash
# Tenth session, second GPU call: the small kernels between two linears (RMSNorm, SwiGLU, decode
# attention) let the next linear be scheduled before their own PDL wait (SD_PDL_EARLY bits 1, 2,
# 4), so that its blocks take the SMs the linear before frees and start their weight loads in its
# tail. GPU tests with all three on; decode 8B at SD_PDL_EARLY = 0 (the tree before), 1, 2, 4, 7,
# alternated twice.
#   bash results/2026-12-02-tcx2/run2.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
export SD_PDL_EARLY=7
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 300
ab_test attn_fused build/gpu/tests/engine/test_attn_fused_gpu 300
ab_test sched_cuda build/gpu/tests/engine/test_sched_cuda 300
unset SD_PDL_EARLY
ab_pack
for k in 1 2; do
    for e in 0 1 2 4 7; do
        SD_PDL_EARLY=$e ab_decode e$e-$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,4,16
    done
    ab_pack
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
