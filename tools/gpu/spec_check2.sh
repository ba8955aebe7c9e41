#!/usr/bin/env bash
# tools/gpu/spec_check2.sh: speculative decoding on the CUDA backend, second pass: the scheduler
# test with drafts on the GPU (test_sched_cuda: batched and solo against the runs without drafts),
# the GPU sampler's tests (test_cuda_sample), test_spec; and what a step of 1 + K tokens a sequence
# costs at Llama-3.1-8B shapes against a one-token step (`bench decode --step-tokens 1,3,5,9`, dense,
# 2:4, 8:16, batch 1 and 4): the break-even of the drafts there. Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_spec \
#       build/gpu/tests/engine/test_sched_cuda build/gpu/tests/engine/test_cuda_sample
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/spec_check2.sh
# (carry .debs, results/tmp). Logs and a summary in $R (tools/gpu_ab.sh).
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-480}
for t in engine/test_spec engine/test_sched_cuda engine/test_cuda_sample; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 150
done
P8=config/presets/llama-3.1-8b.json
timeout 330 build/gpu/sparsed bench decode --preset "$P8" --pattern dense,2:4,8:16 --batch 1,4 \
    --step-tokens 1,3,5,9 --warmup 20 --steps 30 --out "$R/decode-steps.md" >/dev/null 2>"$R/decode-steps.err"
ab_note "bench decode --step-tokens rc=$? $(ab_el) s"
grep -E '^\| (dense|[0-9]+:[0-9]+) ' "$R/decode-steps.md" >>"$R/summary.txt"
ab_pack
