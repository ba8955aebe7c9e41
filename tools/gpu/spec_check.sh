#!/usr/bin/env bash
# tools/gpu/spec_check.sh: speculative decoding by prompt lookup (engine/spec.h) on the CUDA
# backend: the GPU tests the change touches (test_sched_cuda, test_cuda_backend, test_warmup; and
# test_spec, which runs on the CPU backend), `sparsed bench spec` on models/tiny with the CUDA
# backend at batch 1 and 4 (the drafts' steps as graphs of their own shape) and with the CPU
# backend on this machine's cores beside it, and the daemon with --spec-tokens on the GPU
# (tools/gpu/spec_serve.py: warm-up, streamed and plain text, /metrics). Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_spec \
#       build/gpu/tests/engine/test_sched_cuda build/gpu/tests/engine/test_cuda_backend \
#       build/gpu/tests/engine/test_warmup
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/spec_check.sh
# (carry .debs, results/tmp). Logs and a summary in $R (tools/gpu_ab.sh).
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-420}
for t in engine/test_spec engine/test_sched_cuda engine/test_warmup engine/test_cuda_backend; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 150
done
for args in "--backend cuda --batch 1" "--backend cuda --batch 4" "--backend cpu --batch 1"; do
    name=$(echo "$args" | tr -d ' -' | sed 's/backend//;s/batch/b/')
    ab_have 40 "bench spec $args" || continue
    timeout 150 build/gpu/sparsed bench spec --model models/tiny $args --gen 256 --tokens 2,4,8 --rounds 3 \
        --out "$R/spec-$name.md" >/dev/null 2>"$R/spec-$name.err"
    ab_note "bench spec $args rc=$? $(ab_el) s"
    grep -E '^\| [a-z]' "$R/spec-$name.md" | grep -v workload | sed "s/^/$name /" >>"$R/summary.txt"
    ab_pack
done
timeout 150 python3 tools/gpu/spec_serve.py --sparsed build/gpu/sparsed >"$R/serve.log" 2>&1
ab_note "spec_serve rc=$? $(ab_el) s: $(tail -1 "$R/serve.log")"
cat "$R/serve.log" >>"$R/summary.txt"
ab_pack
