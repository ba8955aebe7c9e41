#!/usr/bin/env bash
# results/2026-12-03-s19/run7.sh: what binds the gather kernel now (Nsight Compute on prof_spmv,
# clocks and caches left alone): 8:16 gate_up and down at one vector on the gather kernel (1 and 2
# rows a warp, split 1), 2:4 gate_up on the compacting kernel (config 101) beside them.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s19/run7.sh
source tools/gpu_ab.sh
ab_build
P=build/gpu/tools/prof_spmv
i=0
for c in "8:16 28672 4096 1 1 1" "8:16 28672 4096 1 2 1" "8:16 4096 14336 1 2 1" "2:4 28672 4096 1 101 1"; do
    i=$((i + 1))
    timeout 100 ncu --clock-control none --kernel-name regex:"spmv" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
        --section ComputeWorkloadAnalysis --section InstructionStats $P $c 5 >"$R/ncu-$i.txt" 2>&1
    ab_note "ncu $i ($c) rc=$? $(ab_el) s"
    ab_pack
done
ab_note "done $(ab_el) s"
ab_pack
