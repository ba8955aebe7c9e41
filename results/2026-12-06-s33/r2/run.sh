#!/usr/bin/env bash
# results/2026-12-06-s33/r2/run.sh: the persistent compacting kernel (rows_per_warp 104: config 103
# on a grid of resident blocks that stage x once, kernels/nm_spmv_c24.cu c24p_spmv_kernel), cut to
# the ~4 minutes of device time left: the GPU tests that cover it (test_spmv_gpu's c24 cases,
# test_swiglu_gpu, test_cuda_backend), back-to-back kernel times of 103 against 104 on the 8B gate_up
# and down (tools/gpu/prof_spmv), then Llama-3.1-8B 2:4 and 4:8 decode at batch 1 without it
# (SD_NM_C24P=0) and with it as the only compacting config (=2), each on its own tuning, alternated
# twice; and a memcheck of the compacting kernels' test if time is left.
# Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/sparsed build/gpu/tools/prof_spmv build/gpu/tests/kernels/test_spmv_gpu \
#       build/gpu/tests/kernels/test_swiglu_gpu build/gpu/tests/engine/test_swiglu_fuse_gpu \
#       build/gpu/tests/engine/test_cuda_backend build/gpu/tests/engine/test_tune_cache_gpu
# then on the device (carry .debs, results/tmp): bash results/2026-12-06-s33/r2/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
AB_PREBUILT=1 prebuilt_start
for t in kernels/test_spmv_gpu kernels/test_swiglu_gpu engine/test_cuda_backend; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 100
done
ab_pack
ab_prof c103-1 build/gpu/tools/prof_spmv 2:4 1 "103:1 103:4" "28672x4096 4096x14336"
ab_prof c104-1 build/gpu/tools/prof_spmv 2:4 1 "104:1 104:4" "28672x4096 4096x14336"
python3 tools/ab_summary.py "$R" --prof --base c103 >"$R/ab-prof.txt" 2>&1
ab_pack
P=2:4,4:8
for v in p0 p2; do
    m=${v#p}
    SD_NM_C24P=$m SD_TUNE_LOG=1 AB_DECODE_ARGS="--tune-cache $R/tune-$v.json" ab_decode $v-0 "$NEW_BIN" llama-3.1-8b $P 1
done
cp "$R/decode.log" "$R/decode-tune.log"
for k in 1 2; do
    for v in p0 p2; do
        m=${v#p}
        SD_NM_C24P=$m AB_DECODE_ARGS="--tune-cache $R/tune-$v.json" ab_decode $v-$k "$NEW_BIN" llama-3.1-8b $P 1
    done
    ab_pack
done
python3 tools/ab_summary.py "$R" --base p0 >"$R/ab.txt" 2>&1
ab_pack
SD_TEST_ONLY=gpu_c24 timeout 60 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
    >"$R/memcheck-c24.log" 2>&1
ab_note "memcheck c24 rc=$? $(tail -1 "$R/memcheck-c24.log")"
ab_pack
cat "$R/summary.txt" "$R/ab-prof.txt" "$R/ab.txt"
