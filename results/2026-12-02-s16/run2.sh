#!/usr/bin/env bash
# results/2026-12-02-s16/run2.sh: where the GEMM-shaped 2:4 kernels (29, 30) spend their time, and
# whether they also pay below 8 vectors.
# test_spmv_gpu (its autotune test now accepts 29 / 30 above 16 vectors) and test_sp24_gpu;
# back-to-back timings of 29 / 30 at 1, 2, 4 vectors against the kernels the autotuner picks there
# now (25, 27, 24, 32, 103, 101) on the 8B shapes; Nsight Compute on 30 at 64 vectors (gate_up),
# 29 at 16 (gate_up) and at 16 with split 4 (o).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s16/run2.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_spmv_gpu kernels/test_sp24_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 1 2 4; do
        for cfg in "29 1" "29 2" "29 4" "29 8" "30 1" "30 2" "30 4" "25 1" "27 1" "24 1" "32 1" "103 1" "101 1"; do
            set -- $cfg
            [ $B -gt 1 ] && { [ $1 = 103 ] || [ $1 = 101 ]; } && continue
            [ $B -eq 1 ] && { [ $1 = 25 ] || [ $1 = 27 ] || [ $1 = 24 ]; } && continue
            echo "$sh B=$B 2:4 rw=$1 split=$2: $(timeout 30 $P 2:4 $r $c $B $1 $2 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
i=0
for c in "28672 4096 64 30 1" "28672 4096 16 29 1" "4096 4096 16 29 4"; do
    i=$((i + 1))
    timeout 120 ncu --clock-control none --kernel-name regex:"spg" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
        --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters \
        $P 2:4 $c 5 >"$R/ncu-$i.txt" 2>&1
    ab_note "ncu $i ($c) rc=$? $(ab_el) s"
    ab_pack
done
