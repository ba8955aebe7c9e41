#!/usr/bin/env bash
# results/2026-12-03-s19/run6.sh: issue #3's kernel table on the final tree, quick form (Llama-3.1-8B
# shapes, dense GEMV, cuBLAS, 2:4 and 16:32) at 1 and 2 vectors: the pattern spread at batch 1-2
# after the gather kernels' lane-major x tile.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s19/run6.sh
source tools/gpu_ab.sh
ab_build
ab_kernels quick build/gpu/sparsed --quick --batch 1,2
ab_note "done $(ab_el) s"
ab_pack
