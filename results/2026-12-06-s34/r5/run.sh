#!/usr/bin/env bash
# results/2026-12-06-s34/r5/run.sh: the chain with claimed row groups (SD_CHAIN_CLAIM: each block's
# producer takes the next 8-row group of a link while any is left; the consumers learn each slot's
# rows from the producer) and with the 2:4 values read without bank conflicts: test_chain_gpu
# (six ways) and its memcheck, then tools/gpu/chain_bench twice, alternated with chain_bench_u4
# (nm_chain.cu built -DSD_CHAIN_UNROLL=4: four 2:4 words in flight a lane) (32 layers of the 8B
# linears, batch 1, dense and 2:4: read, graph, packed, claim, free, free-claim, compute), and
# Nsight Compute on the 2:4 compute-only launch of a 4-layer run (launch 31 of chain_kernel there:
# dense takes 3 checking launches and 4 rounds of 5, then 2:4 3 and the warm-up round's 5th).
# Binaries prebuilt here (make BUILD=build/gpu build/gpu/tests/kernels/test_chain_gpu
# build/gpu/tools/chain_bench), packed into results/tmp/bins.tar.xz; on the device (carry .debs,
# results/tmp): bash results/2026-12-06-s34/r5/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # ab_have
AB_PREBUILT=1 ab_build
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$R/gpu.txt" 2>&1
ab_test chain_gpu build/gpu/tests/kernels/test_chain_gpu 60
timeout 90 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_chain_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck rc=$? $(tail -1 "$R/memcheck.log")"
for k in 1 2; do
    for v in chain_bench chain_bench_u4; do
        ab_have 40 "$v $k" || break
        timeout 100 build/gpu/tools/$v 32 20 >"$R/$v-$k.md" 2>"$R/$v-$k.err"
        ab_note "$v $k rc=$? $(ab_el) s"
        grep '^| ' "$R/$v-$k.md" | sed "s/^/$v-$k /" >>"$R/summary.txt"
    done
done
if ab_have 60 "ncu"; then
    timeout 120 ncu --kernel-name regex:chain_kernel --launch-skip 30 --launch-count 1 --set full \
        build/gpu/tools/chain_bench 4 1 >"$R/ncu-compute.txt" 2>&1
    ab_note "ncu rc=$? $(ab_el) s"
fi
cat "$R/summary.txt"
