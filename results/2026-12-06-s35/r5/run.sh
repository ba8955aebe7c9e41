#!/usr/bin/env bash
# results/2026-12-06-s35/r5/run.sh: why the 2:4 sparse tensor-core kernels (mma.sp, cfg 25 / 27,
# kernels/NOTES.md v21), with about half the compacting kernel's instructions a value, lose to it
# at batch 1. tools/gpu/prof_spmv times 2:4 at B = 1 on the four 8B linears for the compacting
# kernel (103), cfg 25 and 27 at split 1 / 2 / 4, and the dense tensor-core GEMV for reference;
# then Nsight Compute profiles gate_up and o under 103, 25 and 27 (speed of light, warp states,
# scheduler, occupancy, launch).
# Binary prebuilt here (make BUILD=build/gpu build/gpu/tools/prof_spmv), packed into
# results/tmp/bins.tar.xz; on the device (carry .debs, results/tmp): bash results/2026-12-06-s35/r5/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_have
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-300}
NEW_BIN=build/gpu/tools/prof_spmv
prebuilt_start
P=build/gpu/tools/prof_spmv
for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
    for cfg in "103 1" "25 1" "25 2" "25 4" "27 1" "27 2" "27 4"; do
        $P 2:4 $shape 1 $cfg 200 >>"$R/prof_time.txt" 2>&1
    done
    $P dense $shape 1 16 1 200 >>"$R/prof_time.txt" 2>&1
done
ab_note "prof_spmv timings $(ab_el) s"
i=0
for c in "2:4 28672 4096 1 103 1" "2:4 28672 4096 1 25 1" "2:4 28672 4096 1 27 1" "2:4 4096 4096 1 103 1" \
    "2:4 4096 4096 1 25 4" "dense 28672 4096 1 16 1"; do
    i=$((i + 1))
    ab_have 20 "ncu $c" || break
    timeout 60 ncu --clock-control none --kernel-name regex:"spmv|gemv|c24|sp24" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --section Occupancy --section LaunchStats $P $c 5 >"$R/ncu-$i.txt" 2>&1
    ab_note "ncu $i ($c) rc=$? $(ab_el) s"
done
ab_pack
cp "$R"/summary.txt "$R"/gpu.txt "$R"/prof_time.txt "$R"/ncu-*.txt "$OUT"/ 2>/dev/null
cat "$R/prof_time.txt"
