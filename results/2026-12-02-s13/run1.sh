#!/usr/bin/env bash
# results/2026-12-02-s13/run1.sh: what each kernel config costs at batch 1 on the 8B shapes, for
# 2:4 (the compacting kernel the autotuner picks against the register-expanding tensor-core one)
# and 4:8 / 8:16 (the gather and row-per-lane kernels it picks against the same tensor-core
# kernel): is the tensor-core structure, or the expansion, what keeps the other patterns slower?
# Built here (tools/gpu/prebuild.sh build/gpu/tools/prof_spmv ...), on the device:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s13/run1.sh
source tools/gpu_ab.sh
ab_build
P=build/gpu/tools/prof_spmv
prof() { # PATTERN ROWS COLS B RW SPLIT
    echo "$($P "$@" 300 2>&1 | tail -1)" >>"$R/prof_b1.txt"
}
for shape in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
    set -- $shape
    for rw in 101 102 103; do prof 2:4 $1 $2 1 $rw 1; done
    for sp in 1 2 4; do prof 2:4 $1 $2 1 24 $sp; done
    for pat in 4:8 8:16; do
        for rw in 1 2 4; do for sp in 1 2; do prof $pat $1 $2 1 $rw $sp; done; done
        for sp in 1 2; do prof $pat $1 $2 1 32 $sp; done
        for sp in 1 2 4; do prof $pat $1 $2 1 24 $sp; done
        for sp in 1 2; do prof $pat $1 $2 1 128 $sp; done
    done
    prof dense $1 $2 1 16 1
    prof dense $1 $2 1 16 2
    ab_note "shape $1x$2 done $(ab_el) s"
done
ab_pack
