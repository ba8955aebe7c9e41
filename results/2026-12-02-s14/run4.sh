#!/usr/bin/env bash
# results/2026-12-02-s14/run4.sh: the RMSNorm in the compacting kernels' x staging
# (sd__cu_linear_norm, kernels/nm_norm.cuh): GPU tests (bit-for-bit against the norm kernel,
# eager and graphs), memcheck of the fused path, then 8B decode at batch 1 with SD_NORM_FUSE=0
# against the default, 2:4 and 4:8, alternated three times on one tuning per pattern; and with
# r3's o-projection config (103) on top.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s14/run4.sh
source tools/gpu_ab.sh
ab_build
ab_test norm_fuse_gpu build/gpu/tests/engine/test_norm_fuse_gpu 300
ab_test swiglu_fuse_gpu build/gpu/tests/engine/test_swiglu_fuse_gpu 300
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 300
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_pack
timeout 300 compute-sanitizer --tool memcheck build/gpu/tests/engine/test_norm_fuse_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck norm_fuse_gpu rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean, $(tail -1 "$R/memcheck.log")"
ab_pack
T=results/2026-12-02-s14/r1
python3 results/2026-12-02-s14/tune_edit.py $T/tune-2-4.json $R/o103.json 4096:4096=103/1
for k in 1 2 3; do
    AB_DECODE_ARGS="--tune-cache $T/tune-2-4.json" SD_NORM_FUSE=0 ab_decode nofuse-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    AB_DECODE_ARGS="--tune-cache $T/tune-2-4.json" ab_decode fuse-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    AB_DECODE_ARGS="--tune-cache $R/o103.json" ab_decode fuseo103-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    AB_DECODE_ARGS="--tune-cache $R/tune-4-8.json" SD_NORM_FUSE=0 ab_decode nofuse-$k "$NEW_BIN" llama-3.1-8b 4:8 1
    AB_DECODE_ARGS="--tune-cache $R/tune-4-8.json" ab_decode fuse-$k "$NEW_BIN" llama-3.1-8b 4:8 1
    AB_DECODE_ARGS="--tune-cache $T/tune-dense.json" ab_decode dense-$k "$NEW_BIN" llama-3.1-8b dense 1
    ab_pack
done
