#!/usr/bin/env bash
# Tenth session, first GPU call: the register-expanding tensor-core kernels with two 16-row tiles
# per warp sharing each step's x fragments (cfg 25) and with an L2 prefetch of the weights N steps
# ahead (SD_NM_PF / bench kernels --pf). GPU tests (every tcx config, the new ones, prefetch),
# memcheck of the new kernels, prof_spmv of explicit configs (back to back), the quick kernel
# table at B = 2..16 with cfg 25 out (--tcx 1) and in, prefetch 0 / 2 / 4, alternated; decode 8B
# with SD_NM_TCX=1 (the tree before) / default / SD_NM_PF=2, alternated twice; where a step goes
# (SD_BENCH_SKIP) at batch 1 and 16.
#   bash results/2026-12-02-tcx2/run1.sh    (.debs carried)
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 400
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 300
for cfg in "8 25 1" "16 25 3" "9 24 2"; do
    set -- $cfg
    SD_NM_PF=2 timeout 60 compute-sanitizer --tool memcheck build/gpu/tools/prof_spmv 4:8 1000 4224 $1 $2 $3 3 >>"$R/memcheck.log" 2>&1
    ab_note "memcheck 4:8 B=$1 rw=$2 split=$3 pf=2 rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
done
timeout 60 compute-sanitizer --tool memcheck build/gpu/tools/prof_spmv 8:16 1000 4224 16 25 1 3 >>"$R/memcheck.log" 2>&1
ab_note "memcheck 8:16 B=16 rw=25 rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean so far"
ab_pack
# explicit configs, back to back (no PDL): 16-row against 32-row, prefetch off / 3
for pat in 2:4 8:16; do
    for B in 8 16; do
        for shp in "6144 4096 1" "4096 4096 1" "4096 4096 2" "28672 4096 1" "4096 14336 1" "4096 14336 2"; do
            set -- $shp
            for rw in 24 25; do
                for pf in 0 3; do
                    if [ $pf = 0 ]; then
                        build/gpu/tools/prof_spmv $pat $1 $2 $B $rw $3 200 >>"$R/prof.txt" 2>&1
                    else
                        echo -n "pf=$pf " >>"$R/prof.txt"
                        SD_NM_PF=$pf build/gpu/tools/prof_spmv $pat $1 $2 $B $rw $3 200 >>"$R/prof.txt" 2>&1
                    fi
                done
            done
        done
    done
done
ab_note "prof done $(ab_el) s"
for k in 1 2; do
    ab_kernels t1p0-$k "$NEW_BIN" --quick --batch 2,4,8,16 --tcx 1
    ab_kernels t2p0-$k "$NEW_BIN" --quick --batch 2,4,8,16
    ab_kernels t2p2-$k "$NEW_BIN" --quick --batch 2,4,8,16 --pf 2
    ab_kernels t2p4-$k "$NEW_BIN" --quick --batch 2,4,8,16 --pf 4
done
ab_pack
for k in 1 2; do
    SD_NM_TCX=1 ab_decode old$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16 4,16
    ab_decode new$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16 4,16
    SD_NM_PF=2 ab_decode pf$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8,8:16 4,16
    ab_pack
done
for skip in "" attn norm swiglu small; do
    n=${skip:-none}
    SD_BENCH_SKIP=$skip ab_decode skip-$n "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
