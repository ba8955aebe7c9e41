#!/usr/bin/env bash
# tools/gpu/think_check.sh: the thirtieth session's engine changes on the CUDA backend: the
# scheduler and sampler tests that walk the JSON / tool-call masks on the GPU (test_sched_cuda,
# test_cuda_sample), test_spmv_gpu after the capped K-tile's revert, and a reasoning model's
# constrained replies through the daemon (tools/gpu/think_cuda.py: thinking_token_budget, a
# bounded integer in a JSON schema, a forced tool call). Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_sched_cuda \
#       build/gpu/tests/engine/test_cuda_sample build/gpu/tests/kernels/test_spmv_gpu
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/think_check.sh
# (carry .debs, results/tmp). Logs and a summary in $R (tools/gpu_ab.sh).
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-300}
for t in engine/test_cuda_sample engine/test_sched_cuda kernels/test_spmv_gpu; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 150
done
timeout 120 python3 tools/gpu/think_cuda.py --sparsed build/gpu/sparsed --backend cuda >"$R/think.log" 2>&1
ab_note "think_cuda rc=$? $(ab_el) s: $(grep -c ': ok' "$R/think.log") of 3 ok"
cat "$R/think.log" >>"$R/summary.txt"
ab_pack
