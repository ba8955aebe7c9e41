#!/usr/bin/env bash
# Seventh session, last GPU call (five minutes of device time left): Nsight Compute on v8's
# register-expanding tensor-core kernel (rw 24) at batch 1, beside the gather kernel
# (results/2026-12-01-prof/ncu-6.txt has the gather kernel on gate_up), to see what limits it
# where it nearly ties (results/2026-12-01-step/r3/prof.txt). Evidence for the next session's
# batch-1 kernel; no code changes. From the repo root, .debs carried.
#   bash results/2026-12-01-tcx1/run6.sh
source tools/gpu_ab.sh
make -j16 BUILD=build/gpu build/gpu/tools/prof_spmv >"$R/build.log" 2>&1
ab_note "build $(ab_el) s: $(test -x build/gpu/tools/prof_spmv && echo ok || echo FAILED)"
P=build/gpu/tools/prof_spmv
i=0
for c in "2:4 28672 4096 1 24 1" "2:4 6144 4096 1 24 1" "2:4 6144 4096 1 2 1"; do
    i=$((i + 1))
    timeout 60 ncu --clock-control none --kernel-name regex:"spmv|gemv" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
        $P $c 5 >"$R/ncu-$i.txt" 2>&1
    ab_note "ncu $i ($c) rc=$? $(ab_el) s"
    ab_pack
done
