#!/usr/bin/env bash
# results/2026-12-05-s29/v35b_check.sh (run from the tree of 766cc6c, as v35_check.sh): v35's pieces at their better sizes. bench gemm (v35, r2) ran expansion +
# cuBLAS by 32 MB pieces faster than whole on every 8B shape at 128-2048 rows, but by 16 MB (the
# default it was A/B'd at) slower; this alternates SD_EXPAND_CHUNK_MB=0 / 32 / 48 on 8:16 prompt
# chunks of 512-2048 tokens (no first-use timing there: cuBLAS always) and 0 / 32 on 8:16 decode
# at 128 / 256 sequences, twice. Same binaries and carry as v35_check.sh.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_bench
P8=config/presets/llama-3.1-8b.json
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-400} AB_BENCH_MIN=25 AB_BENCH_TIMEOUT=100
for round in 1 2; do
    for mb in 0 32 48; do
        ab_bench mb$mb-$round prefill SD_EXPAND_CHUNK_MB=$mb -- --pattern 8:16 --chunk 512,1024,2048
    done
    for mb in 0 32; do
        ab_bench mb$mb-$round decode SD_EXPAND_CHUNK_MB=$mb -- --pattern 8:16 --batch 128,256
    done
done
