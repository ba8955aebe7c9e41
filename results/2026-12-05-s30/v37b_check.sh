#!/usr/bin/env bash
# tools/gpu/v37b_check.sh: the decode half of v37_check.sh (the capped K-tile against the default,
# alternated twice, batch 1-2 of 4:8, 8:16, 16:32) and then issue #3's and #4's batch-1 records
# (b1_records): what v37_check's first call could not run (the daemon lacked libunistring).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/v37b_check.sh
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_bench, b1_records
P8=config/presets/llama-3.1-8b.json
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-420} AB_BENCH_MIN=25 AB_BENCH_TIMEOUT=60
for round in 1 2; do
    ab_bench default-$round decode SD_X=1 -- --pattern 4:8,8:16,16:32 --batch 1,2
    ab_bench ktcap-$round decode SD_NM_KT_CAP=1 -- --pattern 4:8,8:16,16:32 --batch 1,2
done
b1_records
