#!/usr/bin/env bash
# tools/gpu/spec_check3.sh: speculative decoding with a draft model (engine/spec_draft.h) on the
# CUDA backend: test_sched_cuda (its draft-model check: the tiny model drafting for itself on a
# CUDA backend of its own), test_spec, `bench spec --backend cuda --draft-model models/tiny` beside
# the prompt lookup's, and the daemon with --spec-draft-model on the GPU (its warm-up, the texts).
# Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_spec \
#       build/gpu/tests/engine/test_sched_cuda
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/spec_check3.sh
# (carry .debs, results/tmp). Logs and a summary in $R (tools/gpu_ab.sh).
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-400}
for t in engine/test_spec engine/test_sched_cuda; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 150
done
for args in "--tokens 4" "--tokens 4 --draft-model models/tiny"; do
    name=$(echo "$args" | tr -d ' -' | sed 's/tokens/k/;s/draftmodelmodels\/tiny/-draft/')
    ab_have 40 "bench spec $args" || continue
    timeout 120 build/gpu/sparsed bench spec --model models/tiny --backend cuda $args --gen 256 --rounds 3 \
        --out "$R/spec-$name.md" >/dev/null 2>"$R/spec-$name.err"
    ab_note "bench spec $args rc=$? $(ab_el) s"
    grep -E '^\| [a-z]' "$R/spec-$name.md" | grep -v workload | sed "s/^/$name /" >>"$R/summary.txt"
    ab_pack
done
timeout 120 python3 tools/gpu/spec_serve.py --sparsed build/gpu/sparsed --draft-model models/tiny \
    >"$R/serve.log" 2>&1
ab_note "spec_serve --draft-model rc=$? $(ab_el) s: $(tail -1 "$R/serve.log")"
cat "$R/serve.log" >>"$R/summary.txt"
ab_pack
