#!/usr/bin/env bash
# results/2026-12-03-s19/run4.sh: with the gather kernels faster (r2), does their SwiGLU epilogue
# (v16: 1-4% slower fused, so sd_nm_swiglu_pays leaves them out) pay now? 8B decode of 4:8 / 8:16 /
# 16:32 at batch 1 and 2, the default policy against SD_SWIGLU_FUSE=2 (fuse wherever the tuned
# kernel takes it), alternated twice on one tuning cache (the first run's picks logged: SD_TUNE_LOG);
# and the SASS of the new gather kernel (1 vector, 1 row a warp).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s19/run4.sh
source tools/gpu_ab.sh
ab_build
CUO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$CUO" -sass build/gpu/sparsed 2>"$R/sass.err" | awk '/Function : /{p = ($0 ~ /nm_spmv_kernelILi1ELi1ELb0E/)} p' |
    xz >"$R/sass.txt.xz"
ab_note "sass $(xz -dc "$R/sass.txt.xz" | wc -l) lines"
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
SD_TUNE_LOG=1 ab_decode pol-1 build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 1,2
SD_SWIGLU_FUSE=2 ab_decode fuse-1 build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 1,2
ab_decode pol-2 build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 1,2
SD_SWIGLU_FUSE=2 ab_decode fuse-2 build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 1,2
ab_note "done $(ab_el) s"
ab_pack
