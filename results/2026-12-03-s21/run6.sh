#!/usr/bin/env bash
# results/2026-12-03-s21/run6.sh: the refine pass's failure no longer fails the step
# (cuda_step.cu refine_failed): test_tune_cache_gpu (SD_TUNE_REFINE=2 injects a failure after the
# first runner-up: every step answers with the plain run's logits, the pass is off after) and
# test_cuda_backend on the final tree.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s21/run6.sh
source tools/gpu_ab.sh
ab_build
ab_test tune_cache build/gpu/tests/engine/test_tune_cache_gpu
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend
ab_note "done $(ab_el) s"
ab_pack
