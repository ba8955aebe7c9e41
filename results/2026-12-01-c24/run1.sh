#!/usr/bin/env bash
# Eighth session, first GPU call: the batch-1 2:4 kernel that compacts x beside the values
# (kernels/nm_spmv_c24.cu, rows_per_warp 101/102/104). Its GPU tests (test_spmv_gpu, memcheck of
# one launch per config), its SASS, prof_spmv against the gather kernel on the 8B shapes, bench
# kernels --quick with and without it, and 8B decode with SD_NM_C24=0/1 alternated.
# From the repo root, .debs carried; results as $OUT/r.tgz.
#   bash results/2026-12-01-c24/run1.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
P=build/gpu/tools/prof_spmv
for rw in 101 102 104; do
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $P 2:4 1000 4096 1 $rw 3 4 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck c24 rw=$rw rc=$?"
done
cuobjdump -sass build/gpu/kernels/nm_spmv_c24.cu.o >"$R/c24.sass" 2>&1
cuobjdump -sass build/gpu/kernels/nm_spmv.cu.o >"$R/nm_spmv.sass" 2>&1
ab_pack
for shp in "6144 4096" "4096 4096" "28672 4096" "4096 14336" "57344 8192" "8192 28672"; do
    for cfg in "1 1" "2 1" "4 2" "101 1" "102 1" "104 1" "101 2" "102 2"; do
        echo "2:4 $shp rw/split $cfg: $(timeout 60 $P 2:4 $shp 1 $cfg 200 2>&1 | tail -1)" >>"$R/prof.txt"
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
ab_kernels quick-c24 "$NEW_BIN" --quick
ab_kernels quick-noc24 "$NEW_BIN" --quick --no-c24
ab_pack
for k in 1 2; do
    SD_NM_C24=0 ab_decode off$k "$NEW_BIN" llama-3.1-8b dense,2:4 1
    ab_decode on$k "$NEW_BIN" llama-3.1-8b dense,2:4 1
done
SD_TUNE_LOG=1 ab_decode tunelog "$NEW_BIN" llama-3.1-8b 2:4 1
grep "^tune:" "$R/decode.log" | tail -8 >>"$R/summary.txt"
ab_pack
