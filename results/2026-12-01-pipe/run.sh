#!/usr/bin/env bash
# Fifth GPU call of 2026-12-01: the pipelined wide tcx kernel (rw 256: weights and x through
# shared memory, 3 steps ahead) against the x-staged one (rw 128), same binary, alternated;
# correctness (all SpMV tests, memcheck of the tcx ones), the decode table, the quick kernel table.
#   bash results/2026-12-01-pipe/run.sh     (repo root, .debs carried; output in $OUT/r.tgz)
source tools/gpu_ab.sh
ab_build
ab_test spmv-gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_pack
P=build/gpu/tools/prof_spmv
for k in 1 2; do
    for B in 8 16 32 64; do
        for rw in 128 256; do
            $P 2:4 28672 4096 $B $rw 1 200 >>"$R/prof_time.txt" 2>&1
            $P 2:4 4096 14336 $B $rw 4 200 >>"$R/prof_time.txt" 2>&1
            $P 2:4 6144 4096 $B $rw 2 200 >>"$R/prof_time.txt" 2>&1
        done
    done
done
$P 4:8 28672 4096 64 256 1 200 >>"$R/prof_time.txt" 2>&1
$P 2:4 28672 4096 16 24 1 200 >>"$R/prof_time.txt" 2>&1
$P dense 28672 4096 16 16 1 200 >>"$R/prof_time.txt" 2>&1
ab_note "prof_spmv timings $(ab_el) s"
SD_TUNE_LOG=1 ab_decode pipe "$NEW_BIN" llama-3.1-8b dense,2:4,4:8 1,4,16,64
grep "^tune:" "$R/decode.log" >"$R/tune.txt"
ab_pack
SD_TEST_ONLY=tcx timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
    build/gpu/tests/kernels/test_spmv_gpu >"$R/memcheck-tcx.log" 2>&1
ab_note "memcheck tcx rc=$? $(ab_el) s: $(tail -1 "$R/memcheck-tcx.log")"
ab_pack
ab_kernels quick "$NEW_BIN" --quick --reps 20
ab_pack
timeout 60 ncu --clock-control none --kernel-name regex:"spmv" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    $P 2:4 28672 4096 64 256 1 5 >"$R/ncu-pipe64.txt" 2>&1
ab_note "ncu pipe64 rc=$? $(ab_el) s"
ab_pack
