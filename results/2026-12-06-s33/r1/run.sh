#!/usr/bin/env bash
# results/2026-12-06-s33/r1/run.sh: the RMSNorm computed in the word-per-lane kernels' x staging
# (SD_NORM_FUSE, kernels/nm_norm.cuh): the GPU tests (the new test_norm_x_gpu and
# test_norm_fuse_gpu, and every other GPU test: the norm kernel now shares nm_norm.cuh's
# arithmetic), then Llama-3.1-8B decode at batch 1, every pattern, the norm fused or not and the
# SwiGLU fused where it pays (1) or wherever the kernel takes it (2), alternated three times on
# one tuning (the first run's, saved); 2:4 without the compacting kernels (SD_NM_C24=0, its own
# tuning), the norm fused or not; and a memcheck of the new kernel test.
# Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tests/kernels/test_norm_x_gpu \
#       build/gpu/tests/engine/test_norm_fuse_gpu build/gpu/tests/kernels/test_spmv_gpu ... (AB_GPU_TESTS)
# then on the device (carry .debs, results/tmp): bash results/2026-12-06-s33/r1/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
AB_PREBUILT=1 prebuilt_start
ab_test norm_x_gpu build/gpu/tests/kernels/test_norm_x_gpu 120
ab_test norm_fuse_gpu build/gpu/tests/engine/test_norm_fuse_gpu 120
ab_gpu_tests
ab_pack
P=dense,2:4,4:8,8:16,16:32
SD_TUNE_LOG=1 AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode tune-0 "$NEW_BIN" llama-3.1-8b $P 1
cp "$R/decode.log" "$R/decode-tune.log"
# 2:4 without the compacting kernels (which do not take the norm): the gather kernel, which does
SD_NM_C24=0 SD_TUNE_LOG=1 AB_DECODE_ARGS="--tune-cache $R/tune-c24off.json" ab_decode c24tune-0 "$NEW_BIN" llama-3.1-8b 2:4 1
for k in 1 2 3; do
    SD_NORM_FUSE=0 AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode base-$k "$NEW_BIN" llama-3.1-8b $P 1
    SD_NORM_FUSE=1 AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode norm-$k "$NEW_BIN" llama-3.1-8b $P 1
    SD_NORM_FUSE=0 SD_SWIGLU_FUSE=2 AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode sw2-$k "$NEW_BIN" llama-3.1-8b $P 1
    SD_NORM_FUSE=1 SD_SWIGLU_FUSE=2 AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode normsw2-$k "$NEW_BIN" llama-3.1-8b $P 1
    SD_NM_C24=0 SD_NORM_FUSE=0 AB_DECODE_ARGS="--tune-cache $R/tune-c24off.json" ab_decode c24off-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    SD_NM_C24=0 SD_NORM_FUSE=1 AB_DECODE_ARGS="--tune-cache $R/tune-c24off.json" ab_decode c24offnorm-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    ab_pack
done
python3 tools/ab_summary.py "$R" --base base >"$R/ab.txt" 2>&1
ab_pack
SD_TEST_ONLY=fused_matches timeout 150 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_norm_x_gpu \
    >"$R/memcheck-norm_x.log" 2>&1
ab_note "memcheck norm_x rc=$? $(tail -1 "$R/memcheck-norm_x.log")"
ab_pack
cat "$R/summary.txt" "$R/ab.txt"
