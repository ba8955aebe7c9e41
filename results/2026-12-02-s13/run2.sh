#!/usr/bin/env bash
# results/2026-12-02-s13/run2.sh: Nsight Compute on the 8B gate_up (28672x4096) at batch 1: the
# 2:4 compacting kernel (cfg 103, 31.7 us in r1), the register-expanding tensor-core kernel on
# 2:4 and 8:16 (cfg 24: 42.8 / 56.7 us), the dense tensor-core GEMV (57.2 us for 1.78x the bytes)
# and the 8:16 row-per-lane kernel (cfg 32, 36.1 us): why the tensor-core structure is slow at
# batch 1 although its expansion takes fewer instructions per value than the compaction.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run2.sh
source tools/gpu_ab.sh
ab_build
P=build/gpu/tools/prof_spmv
i=0
for c in "2:4 28672 4096 1 103 1" "2:4 28672 4096 1 24 1" "dense 28672 4096 1 16 1" "8:16 28672 4096 1 24 1" \
    "8:16 28672 4096 1 32 1"; do
    i=$((i + 1))
    timeout 100 ncu --clock-control none --kernel-name regex:"spmv|gemv" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
        --section ComputeWorkloadAnalysis --section InstructionStats $P $c 5 >"$R/ncu-$i.txt" 2>&1
    ab_note "ncu $i ($c) rc=$? $(ab_el) s"
done
ab_pack
