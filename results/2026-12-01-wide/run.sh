#!/usr/bin/env bash
# Fourth GPU call of 2026-12-01: the wide tcx kernel with x staged in shared memory (cp.async,
# double-buffered; NOTES.md v9). Correctness (tcx tests, memcheck), single-config timings next to
# the dense tensor-core GEMV, the decode table, and ncu on B = 64.
#   bash results/2026-12-01-wide/run.sh     (repo root, .debs carried; output in $OUT/r.tgz)
source tools/gpu_ab.sh
ab_build
SD_TEST_ONLY=tcx ab_test spmv-gpu-tcx build/gpu/tests/kernels/test_spmv_gpu 200
ab_pack
P=build/gpu/tools/prof_spmv
for c in "2:4 28672 4096 8 24 1" "2:4 28672 4096 8 128 1" "2:4 28672 4096 16 24 1" "2:4 28672 4096 16 128 1" \
    "2:4 28672 4096 32 128 1" "2:4 28672 4096 64 128 1" "2:4 28672 4096 64 128 2" "4:8 28672 4096 64 128 1" \
    "2:4 6144 4096 64 128 2" "2:4 4096 14336 64 128 4" "2:4 4096 14336 16 128 4" "dense 28672 4096 16 16 1"; do
    $P $c 200 >>"$R/prof_time.txt" 2>&1
done
ab_note "prof_spmv timings $(ab_el) s"
SD_TUNE_LOG=1 ab_decode wide "$NEW_BIN" llama-3.1-8b dense,2:4,4:8 1,4,16,64
grep "^tune:" "$R/decode.log" >"$R/tune.txt"
ab_pack
SD_TEST_ONLY=tcx timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
    build/gpu/tests/kernels/test_spmv_gpu >"$R/memcheck-tcx.log" 2>&1
ab_note "memcheck tcx rc=$? $(ab_el) s: $(tail -1 "$R/memcheck-tcx.log")"
ab_pack
timeout 100 ncu --clock-control none --kernel-name regex:"spmv" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    $P 2:4 28672 4096 64 128 1 5 >"$R/ncu-wide64.txt" 2>&1
ab_note "ncu wide64 rc=$? $(ab_el) s"
ab_pack
