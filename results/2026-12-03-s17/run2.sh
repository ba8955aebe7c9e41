#!/usr/bin/env bash
# results/2026-12-03-s17/run2.sh: the wide register-expanding kernel at 128 rows a block with 4
# steps in flight where two blocks an SM still fit (1-4 n-tiles; 8 stays at 3). test_spmv_gpu;
# back-to-back timings of 128 on the 8B shapes for 4:8, 8:16, 16:32 at 4 and 16 vectors (beside
# r1's prof.txt); 8B decode 4:8, 8:16, 16:32 at batch 4 and 16 against 370484b (old: its sparsed),
# alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s17/run2.sh
source tools/gpu_ab.sh
ab_build
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | tr '\n' ' ')"
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 4 16; do
        for pat in 4:8 8:16 16:32; do
            for cfg in "128 1" "128 4"; do
                set -- $cfg
                echo "$sh B=$B $pat rw=$1 split=$2: $(timeout 30 $P $pat $r $c $B $1 $2 100 2>&1 | tail -1)" >>"$R/prof.txt"
            done
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
export SD_TUNE_LOG=1
for k in 1 2; do
    ab_decode old-$k results/tmp/old_sparsed llama-3.1-8b 4:8,8:16,16:32 4,16
    ab_decode new-$k build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 4,16
    ab_pack
done
