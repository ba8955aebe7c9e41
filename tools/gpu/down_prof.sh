#!/usr/bin/env bash
# tools/gpu/down_prof.sh: the pattern spread's one shape (kernels/NOTES.md v35): the 8B down
# projection (4096 x 14336) at batch 1, where 8:16 / 16:32 (the gather kernel) take ~25% longer
# than 2:4 / 4:8 (the compacting kernels). tools/gpu/prof_spmv times each config the tuner has
# (rows a warp x split-K) for every pattern, then Nsight Compute profiles the tuned pick of each
# (SpeedOfLight, memory, warp stalls, occupancy). Binaries prebuilt here:
#   tools/gpu/prebuild.sh build/gpu/tools/prof_spmv
# then on the device: tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/down_prof.sh
# (carry .debs, results/tmp). Results in $R: prof_time.txt, ncu-*.txt.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-240}
P=build/gpu/tools/prof_spmv
for pat in 2:4 4:8 8:16 16:32; do
    for cfg in "1 1" "2 1" "4 1" "1 2" "2 2" "1 4" "2 4" "101 1" "102 1" "103 1"; do
        $P $pat 4096 14336 1 $cfg 200 >>"$R/prof_time.txt" 2>&1
    done
done
$P dense 4096 14336 1 16 1 200 >>"$R/prof_time.txt" 2>&1
ab_note "prof_spmv timings $(ab_el) s"
ab_pack
i=0
for c in "2:4 4096 14336 1 103 1" "4:8 4096 14336 1 102 1" "8:16 4096 14336 1 2 1" "8:16 4096 14336 1 1 1" \
    "16:32 4096 14336 1 2 1" "8:16 28672 4096 1 1 1"; do
    i=$((i + 1))
    ab_have 20 "ncu $c" || break
    timeout 60 ncu --clock-control none --kernel-name regex:"spmv|gemv|c24|c48" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --section Occupancy --section LaunchStats $P $c 5 >"$R/ncu-$i.txt" 2>&1
    ab_note "ncu $i ($c) rc=$? $(ab_el) s"
    ab_pack
done
