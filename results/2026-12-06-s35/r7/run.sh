#!/usr/bin/env bash
# results/2026-12-06-s35/r7/run.sh: r6's experimental kernel (tools/gpu/spf_bench.cu) with the next
# step's weights and metadata loaded while the current one computes (SPF_PREF=1: 128 registers, 2
# blocks an SM, two steps a warp in flight) against r6's form (SPF_PREF=0: 83 registers, 3 blocks,
# one step) and the compacting kernel, back to back on the four 8B linears at B = 1 (split 1, 2)
# and B = 2; Nsight Compute on gate_up for the new form.
# Built here: nvcc -O3 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -DSPF_MINB=0 -DSPF_PREF={0,1}
#   tools/gpu/spf_bench.cu build/gpu/libsparsed.a -o build/gpu/tools/spf_bench_m0_p{0,1} (libraries as
#   r6); packed into results/tmp/bins.tar.xz; on the device: bash results/2026-12-06-s35/r7/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_have
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-240}
NEW_BIN=build/gpu/tools/spf_bench_m0_p1
prebuilt_start
for k in 1 2; do
    for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
        for v in p0 p1; do
            for sp in 1 2; do
                build/gpu/tools/spf_bench_m0_$v $shape 1 $sp 200 2>&1 | sed "s/^/$v-$k /" >>"$R/spf.txt"
            done
            build/gpu/tools/spf_bench_m0_$v $shape 2 1 200 2>&1 | sed "s/^/$v-$k /" >>"$R/spf.txt"
        done
    done
done
ab_note "spf timings $(ab_el) s"
ab_have 20 ncu && timeout 60 ncu --clock-control none --kernel-name regex:spf_kernel --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    build/gpu/tools/spf_bench_m0_p1 28672 4096 1 1 5 >"$R/ncu-1.txt" 2>&1
ab_pack
cp "$R"/summary.txt "$R"/gpu.txt "$R"/spf.txt "$R"/ncu-*.txt "$OUT"/ 2>/dev/null
grep -c FAILED "$R/spf.txt"; grep -v check "$R/spf.txt"
