#!/usr/bin/env bash
# results/2026-12-05-s29/v35_check.sh (was tools/gpu/v35_check.sh in 766cc6c, whose code it measured;
# that code is reverted, its diff in pieces.patch): the expansion + cuBLAS by pieces (sd__cu_expand_gemm, SD_EXPAND_CHUNK_MB,
# kernels/NOTES.md v35), written without a GPU, checked and timed in one device call:
#   1. test_expand_gpu (the pieces against the whole matrix, every pattern), test_cuda_backend,
#      test_warmup and test_cslt_graph (the decode graphs, where the pieces are captured);
#   2. `sparsed bench gemm` at 128-2048 rows: expansion + cuBLAS whole and by 8 / 16 / 32 MB pieces;
#   3. A/B alternated twice: 8:16 and 4:8 decode at 128 / 256 sequences (first use times the tiles
#      against expansion + cuBLAS per linear) and 8:16 prompt chunks of 128-2048 tokens, by pieces
#      (the default, 16 MB) against SD_EXPAND_CHUNK_MB=0 (the whole matrix, as before); dense once.
# Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_{expand_gpu,cuda_backend,warmup,cslt_graph}
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/v35_check.sh
# carry: .debs, results/tmp.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_bench
P8=config/presets/llama-3.1-8b.json
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-480} AB_BENCH_MIN=25 AB_BENCH_TIMEOUT=100
for t in test_expand_gpu test_cuda_backend test_warmup test_cslt_graph; do
    ab_test "$t" "build/gpu/tests/engine/$t" 200
done
ab_pack
timeout 120 build/gpu/sparsed bench gemm --preset $P8 --rows 128,256,512,2048 --reps 10 --out "$R/gemm.md" \
    >/dev/null 2>"$R/gemm.err"
ab_note "bench gemm rc=$? $(ab_el) s"
grep -E '^\| (qkv|o|gate_up|down) ' "$R/gemm.md" >>"$R/summary.txt"
ab_pack
for round in 1 2; do
    ab_bench pieces-$round decode SD_X=1 -- --pattern 8:16,4:8 --batch 128,256
    ab_bench whole-$round decode SD_EXPAND_CHUNK_MB=0 -- --pattern 8:16,4:8 --batch 128,256
    ab_bench pieces-$round prefill SD_X=1 -- --pattern 8:16 --chunk 128,512,2048
    ab_bench whole-$round prefill SD_EXPAND_CHUNK_MB=0 -- --pattern 8:16 --chunk 128,512,2048
done
ab_bench dense decode -- --pattern dense --batch 128,256
