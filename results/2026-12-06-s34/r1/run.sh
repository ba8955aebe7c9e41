#!/usr/bin/env bash
# results/2026-12-06-s34/r1/run.sh: the persistent chain of linears (kernels/nm_chain.cu, NOTES v40)
# on its first GPU: test_chain_gpu (and under compute-sanitizer memcheck), then tools/gpu/chain_bench
# at 32 layers of the 8B linears, batch 1, dense and 2:4: the read stream, the tuned kernels in a
# graph, the chain, the chain without waits; on the 4 x 40 KB ring and the 5 x 38 KB one, twice each.
# Binaries prebuilt here (make BUILD=build/gpu build/gpu/tests/kernels/test_chain_gpu
# build/gpu/tools/chain_bench; chain_bench5 linked with nm_chain.cu built -DSD_CHAIN_SLOTS=5
# -DSD_CHAIN_SLOT_KB=38), packed into results/tmp/bins.tar.xz; on the device (carry .debs,
# results/tmp): bash results/2026-12-06-s34/r1/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # ab_have
AB_PREBUILT=1 ab_build
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$R/gpu.txt" 2>&1
ab_test chain_gpu build/gpu/tests/kernels/test_chain_gpu 60
ab_pack
timeout 60 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_chain_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck rc=$? $(tail -1 "$R/memcheck.log")"
ab_pack
for k in 1 2; do
    for v in chain_bench chain_bench5; do
        ab_have 60 "$v $k" || break
        timeout 150 build/gpu/tools/$v 32 20 >"$R/$v-$k.md" 2>"$R/$v-$k.err"
        ab_note "$v $k rc=$? $(ab_el) s"
        grep '^| ' "$R/$v-$k.md" | sed "s/^/$v-$k /" >>"$R/summary.txt"
        ab_pack
    done
done
cat "$R/summary.txt"
