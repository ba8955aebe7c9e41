#!/usr/bin/env bash
# results/2026-12-03-s20/run2.sh: the autotuner times each config back to back over the linears of
# several layers (kernels/nm_autotune.cu time_burst, engine/cuda_linear.cu tune_args) instead of by
# single launches on an idle stream. Every GPU test; then the 8B decode with fresh tunings, single
# (SD_TUNE_BURST=0) against back to back, three processes a side alternated (a tuning is a draw:
# the question is whether back to back draws better and more alike), every pattern at batch 1 and
# 4; then the tables of record with the back-to-back tuner.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s20/run2.sh
source tools/gpu_ab.sh
ab_build
ab_gpu_tests
ab_pack
export SD_TUNE_LOG=1
for k in 1 2 3; do
    SD_TUNE_BURST=0 ab_decode single-$k build/gpu/sparsed llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4
    ab_decode burst-$k build/gpu/sparsed llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4
    ab_pack
done
ab_records build/gpu/sparsed
ab_note "done $(ab_el) s"
ab_pack
