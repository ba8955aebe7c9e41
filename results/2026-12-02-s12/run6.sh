#!/usr/bin/env bash
# results/2026-12-02-s12/run6.sh: the 8B decode table of record again with the autotuner's
# stream-K policy (2c221c6; r3's 8:16 batch-4 row ran a stream-K draw). The daemon of run5's pack:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s12/run6.sh
source tools/gpu_ab.sh
ab_build
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
ab_decode rec-8b "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16,16:32 1,4,16,64
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
