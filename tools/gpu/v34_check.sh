#!/usr/bin/env bash
# tools/gpu/v34_check.sh: the v33 defaults checked (kernels/NOTES.md v33-v34): the GPU tests they
# touch, then the A/B of cuSPARSELt in the decode graphs and the warp expansion against their off
# switches, alternated twice, with the batch-1 records of issues #3 and #4 (b1_records of
# tools/gpu/lib.sh) between the two, so that an H200 call that runs short still records them.
# Binaries prebuilt here (tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/engine/test_...),
# then on the device:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 AB_LIMIT_S=330 bash tools/gpu/v34_check.sh
# carry: .debs, results/tmp.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_bench, b1_records
P8=config/presets/llama-3.1-8b.json
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-330} AB_BENCH_MIN=25 AB_BENCH_TIMEOUT=60
for t in test_cslt_graph test_cuda_backend test_expand_gpu test_cslt test_warmup test_cuda_sample; do
    ab_test "$t" "build/gpu/tests/engine/$t" 200
done
ab_pack
b1_records
for round in 1 2; do
    ab_bench default-$round decode SD_X=1 -- --pattern 2:4 --batch 128,256
    ab_bench nographs-$round decode SD_CUSPARSELT_GRAPHS=0 -- --pattern 2:4 --batch 128,256
    ab_bench default-$round prefill SD_X=1 -- --pattern 8:16 --chunk 128,512
    ab_bench nowarp-$round prefill SD_EXPAND_WARP=0 -- --pattern 8:16 --chunk 128,512
done
