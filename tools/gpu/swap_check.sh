#!/usr/bin/env bash
# tools/gpu/swap_check.sh: what the README's known limits say has run on the CPU backend only, run
# with the CUDA backend: the asynchronous hot swap (tests/admin/test_admin_swap.py, every daemon
# started with SD_SERVE_ARGS="--backend cuda") and the scheduler on the GPU (test_sched_cuda: batched
# and prefix-cached requests against single runs), with test_cuda_sample (logit_bias and the JSON /
# tool-call masks in the GPU sampler). Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_cuda_sample \
#       build/gpu/tests/engine/test_sched_cuda
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/swap_check.sh
# (carry .debs, results/tmp). Logs and a summary in $R (tools/gpu_ab.sh).
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-300}
for t in test_cuda_sample test_sched_cuda; do
    ab_test "$t" "build/gpu/tests/engine/$t" 120
done
SD_BUILD=build/gpu SD_SERVE_ARGS="--backend cuda" timeout 200 python3 -m pytest -q -p no:cacheprovider \
    tests/admin/test_admin_swap.py >"$R/admin-swap.log" 2>&1
ab_note "admin swap (cuda) rc=$? $(ab_el) s: $(tail -1 "$R/admin-swap.log")"
ab_pack
