#!/usr/bin/env bash
# results/2026-12-02-s15/run2.sh: the sparse tensor-core 2:4 kernel (cfg 25) with its weights
# through a per-warp cp.async ring of 4 steps instead of one register-prefetched step (r1 found it
# and the register-expanding kernel at 50-60% of the read ceiling at B = 4-16). GPU tests (spmv,
# swiglu; memcheck on swiglu, which runs cfg 25 fused); back-to-back timings as in r1; bench
# kernels --quick with and without it; 8B decode 2:4 at batch 1, 4, 16 with and without it,
# alternated twice, fresh tunings.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s15/run2.sh
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_note "probe: $(grep 'sp24' "$R/test-spmv_gpu.log" | tr '\n' ' ')"
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
timeout 300 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_swiglu_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck swiglu_gpu rc=$? $(tail -1 "$R/memcheck.log")"
ab_pack
P=build/gpu/tools/prof_spmv
for sh in 6144:4096 4096:4096 28672:4096 4096:14336; do
    r=${sh%:*} c=${sh#*:}
    for B in 1 4 8 16; do
        for cfg in "2:4 25 1" "2:4 24 1" "dense 16 1"; do
            set -- $cfg
            echo "$sh B=$B $1 rw=$2 split=$3: $(timeout 30 $P $1 $r $c $B $2 $3 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
ab_kernels sp build/gpu/sparsed --quick --batch 1,2,4,8,16
ab_kernels nosp build/gpu/sparsed --quick --batch 1,2,4,8,16 --no-sp24
ab_pack
for k in 1 2; do
    SD_NM_SP24=1 ab_decode sp-$k build/gpu/sparsed llama-3.1-8b dense,2:4 1,4,16
    SD_NM_SP24=0 ab_decode nosp-$k build/gpu/sparsed llama-3.1-8b 2:4 1,4,16
    ab_pack
done
