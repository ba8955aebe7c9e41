#!/usr/bin/env bash
# tools/gpu/v33_check.sh: the v33 defaults checked on a GPU in one short call (kernels/NOTES.md v33):
#   1. the GPU tests the new defaults touch: test_cslt_graph (cuSPARSELt in the decode graphs, now
#      on by default; its tie allowance and off cases corrected), test_cuda_backend and
#      test_expand_gpu (the warp expansion, now the default), test_cslt, test_warmup,
#      test_cuda_sample;
#   2. A/B alternated twice: 2:4 decode at 128 / 256 sequences with the defaults against
#      SD_CUSPARSELT_GRAPHS=0, and 8:16 prompt chunks of 128 / 512 tokens against SD_EXPAND_WARP=0.
# Binaries prebuilt here (tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_...),
# on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/v33_check.sh
# (AB_LIMIT_S, default 250: the benches are skipped past it).
# carry: .debs, results/tmp.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_bench
P8=config/presets/llama-3.1-8b.json
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-250} AB_BENCH_MIN=25 AB_BENCH_TIMEOUT=60
for t in test_cslt_graph test_cuda_backend test_expand_gpu test_cslt test_warmup test_cuda_sample; do
    ab_test "$t" "build/gpu/tests/engine/$t" 200
done
ab_pack
for round in 1 2; do
    ab_bench default-$round decode SD_X=1 -- --pattern 2:4 --batch 128,256
    ab_bench nographs-$round decode SD_CUSPARSELT_GRAPHS=0 -- --pattern 2:4 --batch 128,256
    ab_bench default-$round prefill SD_X=1 -- --pattern 8:16 --chunk 128,512
    ab_bench nowarp-$round prefill SD_EXPAND_WARP=0 -- --pattern 8:16 --chunk 128,512
done
