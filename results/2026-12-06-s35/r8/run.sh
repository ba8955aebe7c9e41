#!/usr/bin/env bash
# results/2026-12-06-s35/r8/run.sh: r6's kernel with two pieces a warp step (SPF_PP=2: 63
# registers, 4 blocks an SM), and two pieces with the next step in flight (SPF_PP=2 SPF_PREF=1: 75
# registers, 3 blocks), against four pieces (r6's form, 83 registers, 3 blocks) and the compacting
# kernel: back to back on the four 8B linears at B = 1 and 2, alternated twice.
# Built here: nvcc -O3 -std=c++17 -I. -gencode arch=compute_90,code=sm_90 -DSPF_PP={4,2} -DSPF_PREF={0,1}
#   tools/gpu/spf_bench.cu build/gpu/libsparsed.a -o build/gpu/tools/spf_pp{4,2}_p{0,1} (libraries as
#   r6); packed into results/tmp/bins.tar.xz; on the device: bash results/2026-12-06-s35/r8/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-240}
NEW_BIN=build/gpu/tools/spf_pp2_p0
prebuilt_start
for k in 1 2; do
    for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
        for v in pp4_p0 pp2_p0 pp2_p1; do
            for b in 1 2; do
                build/gpu/tools/spf_$v $shape $b 1 200 2>&1 | sed "s/^/$v-$k /" >>"$R/spf.txt"
            done
        done
    done
done
ab_note "spf timings $(ab_el) s"
ab_pack
cp "$R"/summary.txt "$R"/gpu.txt "$R"/spf.txt "$OUT"/ 2>/dev/null
grep -c FAILED "$R/spf.txt"; grep -v check "$R/spf.txt" | grep -- "-1 "
