#!/usr/bin/env bash
# results/2026-12-03-s21/run4.sh: the session's final tree: every GPU test binary, the /metrics
# GPU gauges through the daemon (--backend cuda), then the decode tables of record (fresh
# tunings, each row with the GPU's clocks and power).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s21/run4.sh
source tools/gpu_ab.sh
ab_build
ab_gpu_tests
ab_test gpu_sensor build/gpu/tests/engine/test_gpu_sensor
SPARSED_BIN=build/gpu/sparsed timeout 200 python3 -m pytest -q tests/server/test_lifecycle.py \
    -k "gpu_gauges or metrics_add_up" >"$R/test-metrics.log" 2>&1
ab_note "test metrics rc=$? $(ab_el) s: $(tail -1 "$R/test-metrics.log")"
ab_pack
ab_records build/gpu/sparsed
grep -E "B=[0-9]+ .*ms/step" "$R/decode.log" >"$R/host.txt"
ab_note "done $(ab_el) s"
ab_pack
