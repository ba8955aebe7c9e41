#!/usr/bin/env bash
# results/2026-12-02-s16/run3.sh: the GEMM-shaped 2:4 kernels (29, 30) with their copies issued by
# fixed-count loops (r2's ncu: ~640 instructions a warp a stage, 6 cycles each), and among the
# autotuner's candidates from 2 vectors.
# test_sp24_gpu, test_spmv_gpu; back-to-back timings of 29 / 30 on the 8B shapes at 2, 8, 16, 64
# vectors (to set beside r1, r2); Nsight Compute on 30 at 64 (gate_up) as in r2; 8B decode 2:4 at
# batch 2, 4, 8, 16, 32, 64 with and without the sparse tensor-core kernels (SD_NM_SP24), alternated
# twice, fresh tunings.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s16/run3.sh
source tools/gpu_ab.sh
ab_build
for t in kernels/test_sp24_gpu kernels/test_spmv_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
ab_note "sp24: $(grep -E 'worst|FAIL' "$R/test-test_sp24_gpu.log" | tr '\n' ' ')"
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 2 8 16 64; do
        for cfg in "29 1" "29 2" "29 4" "29 8" "30 1" "30 2" "30 4"; do
            set -- $cfg
            echo "$sh B=$B 2:4 rw=$1 split=$2: $(timeout 30 $P 2:4 $r $c $B $1 $2 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
    done
done
ab_note "prof done $(ab_el) s"
timeout 120 ncu --clock-control none --kernel-name regex:"spg" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section InstructionStats $P 2:4 28672 4096 64 30 1 5 >"$R/ncu-1.txt" 2>&1
ab_note "ncu rc=$? $(ab_el) s"
ab_pack
export SD_TUNE_LOG=1
for k in 1 2; do
    SD_NM_SP24=1 ab_decode sp-$k build/gpu/sparsed llama-3.1-8b 2:4 2,4,8,16,32,64
    SD_NM_SP24=0 ab_decode nosp-$k build/gpu/sparsed llama-3.1-8b 2:4 2,4,8,16,32,64
    ab_pack
done
