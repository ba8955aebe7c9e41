#!/usr/bin/env bash
# results/2026-12-04-s22/run2.sh: the start-up warm-up (engine/warmup.h): every GPU test binary,
# the daemon's warm-up tests on the CUDA backend (tests/server/test_warmup.py), then run1's serving
# load at Llama-3.1-8B shapes again, now with the warm-up (the default): dense, 2:4, 8:16.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-04-s22/run2.sh
# carry: .debs, results/tmp (bins.tar.xz with the daemon and the GPU test binaries; the Llama-3
# tokenizer in results/tmp/llama3).
source tools/gpu_ab.sh
tar xJf results/tmp/llama3.tar.xz -C results/tmp
ab_build
ab_gpu_tests
SPARSED_BIN=build/gpu/sparsed timeout 240 python3 -m pytest -q tests/server/test_warmup.py \
    tests/server/test_lifecycle.py -k "warm or gpu_gauges" >"$R/test-warmup.log" 2>&1
ab_note "test warmup rc=$? $(ab_el) s: $(tail -1 "$R/test-warmup.log")"
ab_pack
B=build/gpu TOK=results/tmp/llama3 OUT=$R timeout $((570 - $(ab_el))) bash tools/gpu/load8b.sh \
    >"$R/load8b.log" 2>&1
ab_note "load8b rc=$? $(ab_el) s"
ab_pack
