#!/usr/bin/env bash
# results/2026-12-03-s21/run3.sh: bench decode with the GPU's clocks and power per row (NVML,
# engine/gpu_sensor.c); then the step's switches against their defaults on one tuning (are any
# defaults stale since they were measured?), alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s21/run3.sh
source tools/gpu_ab.sh
ab_build
ab_test gpu_sensor build/gpu/tests/engine/test_gpu_sensor
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend
ab_pack
pats=dense,2:4,8:16
AB_DECODE_ARGS="--tune-cache $R/tune-8b.json"
ab_decode tune build/gpu/sparsed llama-3.1-8b $pats 1,4
for k in 1 2; do
    ab_decode base-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    SD_ATTN_CHUNK=32 ab_decode chunk32-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    SD_ATTN_CHUNK=128 ab_decode chunk128-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    SD_ATTN_CLUSTER=0 ab_decode cl0-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    SD_ATTN_CLUSTER=2 ab_decode cl2-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    SD_ATTN_EARLY=0 ab_decode early0-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    SD_SWIGLU_FUSE=0 ab_decode sw0-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    SD_SWIGLU_FUSE=2 ab_decode sw2-$k build/gpu/sparsed llama-3.1-8b $pats 1,4
    ab_pack
done
grep -E "B=[0-9]+ .*ms/step" "$R/decode.log" >"$R/host.txt"
ab_note "done $(ab_el) s"
ab_pack
