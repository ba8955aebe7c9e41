#!/usr/bin/env bash
# results/2026-12-02-s15/run1.sh: the 2:4 kernel on the sparse tensor cores (mma.sp, cfg 25,
# kernels/nm_spmv_sp.cu). GPU tests (they print which metadata layout the hardware implements;
# build/gpuA is the same tree built with the other one, -DSD_SP24_META=0, used below if the test
# says so); back-to-back timings of cfg 25 against the register-expanding kernel (24) and the
# dense tensor-core GEMV (16) on the 8B shapes at B = 1..16 (prof_spmv); bench kernels --quick
# with and without it; 8B decode 2:4 at batch 1, 4, 16 with and without it (SD_NM_SP24=0),
# alternated twice, fresh tunings (the kernel choice is what changes). The binaries were built
# with the kernel among the candidates by default; SD_NM_SP24 is set either way here.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s15/run1.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
BIN=$NEW_BIN
l=$(grep 'sp24 metadata layout' "$R/test-spmv_gpu.log")
ab_note "probe: $l"
e0=$(echo "$l" | sed -n 's/.*layout 0: rel L2 \([^,]*\),.*/\1/p')
e1=$(echo "$l" | sed -n 's/.*layout 1: \(.*\)$/\1/p')
if python3 -c "import sys; sys.exit(0 if float('$e0') < 1e-3 and not float('$e1') < 1e-3 else 1)" 2>/dev/null; then
    BIN=build/gpuA/sparsed
    ab_test spmv_gpuA build/gpuA/tests/kernels/test_spmv_gpu 300
fi
ab_note "decode binary: $BIN"
ab_pack
P=build/gpu/tools/prof_spmv
[ "$BIN" = build/gpuA/sparsed ] && P=build/gpuA/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 1 2 4 8 16; do
        for cfg in "2:4 25 1" "2:4 25 2" "2:4 24 1" "2:4 24 2" "dense 16 1" "dense 16 2"; do
            set -- $cfg
            echo "$sh B=$B $1 rw=$2 split=$3: $(timeout 30 $P $1 $r $c $B $2 $3 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
        [ $B = 1 ] && echo "$sh B=1 2:4 rw=103 split=1: $(timeout 30 $P 2:4 $r $c 1 103 1 100 2>&1 | tail -1)" >>"$R/prof.txt"
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
ab_kernels sp "$BIN" --quick --batch 1,2,4,8,16
ab_kernels nosp "$BIN" --quick --batch 1,2,4,8,16 --no-sp24
ab_pack
for k in 1 2; do
    SD_NM_SP24=1 ab_decode sp-$k "$BIN" llama-3.1-8b dense,2:4 1,4,16
    SD_NM_SP24=0 ab_decode nosp-$k "$BIN" llama-3.1-8b 2:4 1,4,16
    ab_pack
done
