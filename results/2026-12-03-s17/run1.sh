#!/usr/bin/env bash
# results/2026-12-03-s17/run1.sh: the wide register-expanding kernel with 32 rows a warp (256 a
# block, rows_per_warp 256: x read once per 256 rows, each x fragment for two row tiles) and one
# barrier a step (both block shapes). test_spmv_gpu / test_sp24_gpu, memcheck on the 8:16 and
# fallback expanding tests; back-to-back timings of 128 / 256 on the 8B shapes for 4:8, 8:16,
# 16:32 at 4, 16, 64 vectors; 8B decode 4:8, 8:16, 16:32 at batch 4, 16, 64 against 0052343 (old:
# its sparsed), alternated twice; the other GPU tests; the decode tables of record.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s17/run1.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu kernels/test_sp24_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | tr '\n' ' ')"
SD_TEST_ONLY=tcx_8_16 timeout 120 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
    >"$R/memcheck.log" 2>&1
ab_note "memcheck tcx_8_16 rc=$? $(tail -1 "$R/memcheck.log")"
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 4 16 64; do
        for pat in 4:8 8:16 16:32; do
            for cfg in "128 1" "128 4" "256 1" "256 4"; do
                set -- $cfg
                echo "$sh B=$B $pat rw=$1 split=$2: $(timeout 30 $P $pat $r $c $B $1 $2 100 2>&1 | tail -1)" >>"$R/prof.txt"
            done
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
export SD_TUNE_LOG=1
for k in 1 2; do
    ab_decode old-$k results/tmp/old_sparsed llama-3.1-8b 4:8,8:16,16:32 4,16,64
    ab_decode new-$k build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 4,16,64
    ab_pack
done
for t in kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend \
    engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_pack
unset SD_TUNE_LOG
ab_records build/gpu/sparsed
