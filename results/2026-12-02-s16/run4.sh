#!/usr/bin/env bash
# results/2026-12-02-s16/run4.sh: the GEMM-shaped 2:4 kernels' blocks walk a range of (row block,
# stage) units; stream-K twins (31, 33) share all units among as many blocks as fit on the SMs; the
# wide register-expanding kernel (128: 4:8 / 8:16 / 16:32 above 16 vectors) issues its copies in
# fixed-count loops as 29 / 30 do since r3.
# test_sp24_gpu, test_spmv_gpu; back-to-back timings of 29 / 30 / 31 / 33 on the 8B shapes at 2,
# 8, 16, 64 vectors (29 / 30 to set beside r3), of 128 for 2:4 (beside r1) and 8:16; 8B decode 2:4
# at batch 2-64 with and without the sparse tensor-core kernels (SD_NM_SP24), alternated twice; 8B
# decode 4:8, 8:16, 16:32 at batch 16 and 64, this tree against 3e2db68 (old: its sparsed),
# alternated twice. Fresh tunings everywhere. Then every other GPU test binary, memcheck, records.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s16/run4.sh
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
        for cfg in "2:4 29 1" "2:4 29 4" "2:4 29 8" "2:4 30 1" "2:4 30 4" "2:4 31 1" "2:4 33 1" \
            "2:4 128 1" "2:4 128 4" "8:16 128 1" "8:16 128 4"; do
            set -- $cfg
            [ $2 = 128 ] && [ $B -lt 16 ] && continue
            echo "$sh B=$B $1 rw=$2 split=$3: $(timeout 30 $P $1 $r $c $B $2 $3 100 2>&1 | tail -1)" >>"$R/prof.txt"
        done
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
export SD_TUNE_LOG=1
for k in 1 2; do
    SD_NM_SP24=1 ab_decode sp-$k build/gpu/sparsed llama-3.1-8b 2:4 2,4,8,16,32,64
    SD_NM_SP24=0 ab_decode nosp-$k build/gpu/sparsed llama-3.1-8b 2:4 2,4,8,16,32,64
    ab_pack
done
for k in 1 2; do
    ab_decode old-$k results/tmp/old_sparsed llama-3.1-8b 4:8,8:16,16:32 16,64
    ab_decode new-$k build/gpu/sparsed llama-3.1-8b 4:8,8:16,16:32 16,64
    ab_pack
done
# The rest of the GPU test binaries, memcheck on the sparse tensor-core tests, and the decode tables
# of record (tools/gpu_ab.sh ab_records) on this tree.
for t in kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend \
    engine/test_tune_cache_gpu engine/test_attn_fused_gpu; do
    ab_test "${t#*/}" build/gpu/tests/$t 300
done
timeout 90 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_sp24_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck sp24_gpu rc=$? $(tail -1 "$R/memcheck.log")"
ab_pack
ab_records build/gpu/sparsed
