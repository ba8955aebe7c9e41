#!/usr/bin/env bash
# results/2026-12-03-s17/run4.sh: the 8B decode table of record on the committed tree (r3's
# binaries): every pattern, batch 1, 4, 16, 64, fresh tuning.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s17/run4.sh
source tools/gpu_ab.sh
ab_build
ab_decode rec-8b build/gpu/sparsed llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4,16,64
ab_pack
