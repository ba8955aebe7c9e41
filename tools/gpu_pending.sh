#!/usr/bin/env bash
# GPU checks waiting for device time (written in the sixth session, whose device time ran out
# after its last run found two GPU test failures; both are fixed in the tree but not yet run on a
# GPU): the `deterministic` option (test_cuda_sample now uses it; test_deterministic checks
# bit-identical reruns, test_gpu_deterministic_no_split the kernels' side), the 2:4
# batched-vs-single bound, and what the option costs. One call,
# from the repo root, .debs carried; everything comes back as $OUT/r.tgz. Afterwards copy this
# script and what it wrote into results/<date>/ and retire it.
#   bash tools/gpu_pending.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv-gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_test cuda-backend build/gpu/tests/engine/test_cuda_backend 200
ab_test cuda-sample build/gpu/tests/engine/test_cuda_sample 200
ab_pack
for k in 1 2; do
    ab_decode base$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16,64
    # the same with the deterministic option (no split-K): what reproducibility costs
    AB_DECODE_ARGS=--deterministic ab_decode det$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16,64
done
ab_pack
