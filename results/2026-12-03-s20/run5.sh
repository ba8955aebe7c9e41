#!/usr/bin/env bash
# results/2026-12-03-s20/run5.sh: the committed tree with the refine pass on by default (r4 showed
# it narrowing the tunings' spread): every GPU test binary, then the decode tables of record
# (fresh tunings, refine on).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s20/run5.sh
source tools/gpu_ab.sh
ab_build
ab_gpu_tests
ab_pack
export SD_TUNE_LOG=1
ab_records build/gpu/sparsed
ab_note "done $(ab_el) s"
ab_pack
