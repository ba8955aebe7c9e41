#!/usr/bin/env bash
# Third GPU call of 2026-12-01: the tcx kernels on by default (tests, decode with the first-use
# decisions logged), then Nsight Compute on single configs (tools/gpu/prof_spmv) to see what
# bounds the batch-1 gather kernel, the tcx kernels at B = 8/16 and the wide one at 64.
#   bash results/2026-12-01-prof/run.sh     (repo root, .debs carried; output in $OUT/r.tgz)
source tools/gpu_ab.sh
ab_build
ab_test spmv-gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_test cuda-backend build/gpu/tests/engine/test_cuda_backend 120
ab_test sched-cuda build/gpu/tests/engine/test_sched_cuda 200
ab_pack
SD_TUNE_LOG=1 ab_decode tcx "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,16:32 1,4,16,64
SD_NM_TCX=0 ab_decode notcx "$NEW_BIN" llama-3.1-8b 2:4 4,16,64
grep "^tune:" "$R/decode.log" >"$R/tune.txt"
ab_pack
P=build/gpu/tools/prof_spmv
for c in "2:4 6144 4096 1 2 1" "2:4 28672 4096 1 1 1" "dense 6144 4096 1 16 1" "dense 28672 4096 1 16 1" \
    "2:4 28672 4096 8 24 1" "4:8 28672 4096 8 24 1" "2:4 28672 4096 16 24 1" "2:4 28672 4096 16 128 1" \
    "2:4 28672 4096 32 128 1" "2:4 28672 4096 64 128 1" "dense 28672 4096 16 16 1" "16:32 28672 4096 8 16 1"; do
    $P $c 200 >>"$R/prof_time.txt" 2>&1
done
ab_note "prof_spmv timings $(ab_el) s"
ab_pack
i=0
for c in "2:4 6144 4096 1 2 1" "dense 6144 4096 1 16 1" "2:4 28672 4096 8 24 1" "2:4 28672 4096 16 24 1" \
    "2:4 28672 4096 64 128 1" "2:4 28672 4096 1 1 1"; do
    i=$((i + 1))
    timeout 100 ncu --clock-control none --kernel-name regex:"spmv|gemv" --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
        --section ComputeWorkloadAnalysis $P $c 5 >"$R/ncu-$i.txt" 2>&1
    ab_note "ncu $i ($c) rc=$? $(ab_el) s"
    ab_pack
done
