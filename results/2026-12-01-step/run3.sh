#!/usr/bin/env bash
# Seventh session, third GPU call: (1) the vectorised RMSNorm (w before the PDL wait, x read
# once) and the fused decode attention's L2 prefetch of its first K/V tile before the PDL wait,
# against the tree before them (.snapold = git archive 53be18c), alternated; the GPU tests they
# touch; (2) where a batch-1 step's time goes now (SD_BENCH_SKIP); (3) prof_spmv: the 2:4 batch-1
# configs side by side on the 8B shapes, including the tensor-core expansion kernel (rw 24) the
# autotuner does not pick at batch 1. From the repo root, .debs carried; results as $OUT/r.tgz.
#   OLD=.snapold bash results/2026-12-01-step/run3.sh
source tools/gpu_ab.sh
ab_build
for t in engine/test_cuda_backend engine/test_attn_fused_gpu engine/test_cuda_sample engine/test_sched_cuda \
    engine/test_capture_cuda engine/test_attn_prefill_gpu; do
    ab_test "$(basename $t)" build/gpu/tests/$t 200
done
ab_pack
for k in 1 2; do
    ab_decode old$k "$OLD_BIN" llama-3.1-8b dense,2:4 1,16
    ab_decode new$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
    ab_pack
done
for sk in norm attn swiglu linears norm,attn,swiglu,qkvpost; do
    SD_BENCH_SKIP=$sk ab_decode "skip-${sk//,/+}" "$NEW_BIN" llama-3.1-8b dense,2:4 1
done
ab_pack
P=build/gpu/tools/prof_spmv
for shp in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
    for cfg in "1 1" "2 1" "4 2" "32 1" "24 1" "24 2" "24 4"; do
        echo "2:4 $shp rw/split $cfg: $(timeout 60 $P 2:4 $shp 1 $cfg 200 2>&1 | tail -1)" >>"$R/prof.txt"
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
