#!/usr/bin/env bash
# results/2026-12-03-s18/run2.sh: the wide register-expanding kernel on the warpgroup MMA
# (kernels/nm_spmv_tcg.cu, rows_per_warp 129), second form: the A fragments from registers
# (expanded as the wide kernel does), x permuted into wgmma's B by 4-byte copies, N = 8-64.
# test_spmv_gpu (129 among the expanding configs),
# memcheck on the 4:8 and 16:32 expanding tests; back-to-back timings of 128 / 256 / 129 on the 8B
# shapes for every pattern at 16, 32, 64 vectors; 8B decode at batch 16, 32, 64 with the kernel
# (default) against SD_NM_WGMMA=0, alternated twice (only if test_spmv_gpu passed).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s18/run2.sh
source tools/gpu_ab.sh
ab_build
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 400
ok=$(tail -1 "$R/test-test_spmv_gpu.log" | grep -c " 0 failed")
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | head -20 | tr '\n' ' ')"
# every config's worst rel L2 on the 4:8 and 16:32 expanding tests (the bf16 ones sit near the
# bound: the output's own rounding); which outputs are off where one fails
for t in tcx_4_8 tcx_16_32; do
    SD_TEST_DIAG=1 SD_TEST_ONLY=$t timeout 150 build/gpu/tests/kernels/test_spmv_gpu >"$R/diag-$t.log" 2>&1
    ab_note "diag $t: $(awk '/cfg [0-9]+ rw/ {k=$2" "$4"/"$6"/"$8"/"$10; e=$NF+0; if (e > m[k]) m[k]=e} END {for (k in m) printf "%s=%.2g ", k, m[k]}' "$R/diag-$t.log")"
    ab_note "diag $t off: $(grep -m 8 -E 'vector .* got' "$R/diag-$t.log" | tr '\n' ' ')"
done
for t in tcx_4_8 tcx_16_32; do
    SD_TEST_ONLY=$t timeout 150 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
        >"$R/memcheck-$t.log" 2>&1
    ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
done
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 16 32 64; do
        for pat in 2:4 4:8 8:16 16:32; do
            for cfg in "128 1" "256 1" "129 1" "129 2" "128 4" "129 4"; do
                set -- $cfg
                echo "$sh B=$B $pat rw=$1 split=$2: $(timeout 30 $P $pat $r $c $B $1 $2 100 2>&1 | tail -1)" >>"$R/prof.txt"
            done
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
if [ "$ok" = 1 ]; then
    export SD_TUNE_LOG=1
    for k in 1 2; do
        SD_NM_WGMMA=0 ab_decode off-$k build/gpu/sparsed llama-3.1-8b 2:4,4:8,8:16,16:32 16,32,64
        ab_decode on-$k build/gpu/sparsed llama-3.1-8b 2:4,4:8,8:16,16:32 16,32,64
        ab_pack
    done
fi
ab_note "done $(ab_el) s"
ab_pack
