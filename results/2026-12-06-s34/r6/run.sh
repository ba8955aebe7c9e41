#!/usr/bin/env bash
# results/2026-12-06-s34/r6/run.sh: claims of one tile (8 rows by a chunk, sums added into y by
# atomics) for the accumulating links of several chunks a row (dense down: 6 chunks, 2:4 down: 4),
# so that a wide link's tail is a tile, not a group's whole row; on 8 consumer warps and on 16 (two
# a row, chain_bench16 / test_chain_gpu16, nm_chain.cu -DSD_CHAIN_WARPS=16 -DSD_CHAIN_WPR=2, now
# with r5's conflict-free loads). Both tests, then each bench twice, alternated (32 layers of the
# 8B linears, batch 1, dense and 2:4).
# Binaries prebuilt here, packed into results/tmp/bins.tar.xz; on the device (carry .debs,
# results/tmp): bash results/2026-12-06-s34/r6/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # ab_have
AB_PREBUILT=1 ab_build
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$R/gpu.txt" 2>&1
ab_test chain_gpu build/gpu/tests/kernels/test_chain_gpu 60
ab_test chain_gpu16 build/gpu/tests/kernels/test_chain_gpu16 60
for k in 1 2; do
    for v in chain_bench chain_bench16; do
        ab_have 40 "$v $k" || break
        timeout 100 build/gpu/tools/$v 32 20 >"$R/$v-$k.md" 2>"$R/$v-$k.err"
        ab_note "$v $k rc=$? $(ab_el) s"
        grep '^| [d2]' "$R/$v-$k.md" | sed "s/^/$v-$k /" >>"$R/summary.txt"
    done
done
cat "$R/summary.txt"
