#!/usr/bin/env bash
# results/2026-12-02-s12/run1.sh: the former tools/gpu/next.sh (what the eleventh session left for the GPU,
# kernels/NOTES.md v17 "Next") plus SD_ATTN_EARLY 0/1, in one call with no build on the device. Here first (about 3 minutes each on 2 cores):
#   make -j2 BUILD=build/gpu build/gpu/sparsed build/gpu/tests/kernels/test_spmv_gpu \
#       build/gpu/tests/engine/test_attn_fused_gpu build/gpu/tests/engine/test_attn_prefill_gpu
#   git worktree add results/tmp/snap9 db80aa7      # the ninth session's tree
#   make -C results/tmp/snap9 -j2 BUILD=build/gpu build/gpu/sparsed
#   strip those five binaries; tar cJf results/tmp/bins.tar.xz <the five>   (75 MB -> 27 MB:
#   carry takes 64 MiB in all)
# then on the device, with carry [".debs", "results/tmp/bins.tar.xz"]:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 OLD=results/tmp/snap9 \
#       bash results/2026-12-02-s12/run1.sh
# 1. test_spmv_gpu, with test_gpu_tc_early: the dense tensor-core GEMV with its first weights
#    loaded before the PDL wait, against the reference and bit for bit against the kernel without;
#    the attention tests: the two split merges share one function since the last device call
#    (engine/cuda_attn_decode.cu merge_splits), and must still agree bit for bit.
# 2. That option in decode (SD_NM_TC_EARLY=1 against 0; the dense linears of the 8B at batch 1-16
#    run that kernel), alternated twice on one tuning cache.
# 3. Qwen3-32B / Llama-3.3-70B 2:4 batch 1, the ninth session's daemon against this one (10.24 →
#    11.13 ms, 20.00 → 20.80 between the two sessions' records): the tree or the machine? No
#    tuning cache (the old daemon has none), so three alternations show the spread.
source tools/gpu_ab.sh
ab_build
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 200
ab_test attn_fused build/gpu/tests/engine/test_attn_fused_gpu 200
ab_test attn_prefill build/gpu/tests/engine/test_attn_prefill_gpu 200
timeout 150 compute-sanitizer --tool memcheck build/gpu/tests/engine/test_attn_fused_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck attn_fused rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean, $(tail -1 "$R/memcheck.log")"
ab_pack
AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode fill "$NEW_BIN" llama-3.1-8b dense,2:4 1,2,4,16
for k in 1 2 3; do
    for e in 0 1; do
        SD_NM_TC_EARLY=$e AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode early$e-$k "$NEW_BIN" \
            llama-3.1-8b dense,2:4 1,2,4,16
    done
    # the fused attention's first K/V tile into registers before the PDL wait (SD_ATTN_EARLY)
    for e in 0 1; do
        SD_ATTN_EARLY=$e AB_DECODE_ARGS="--tune-cache $R/tune.json" ab_decode attn$e-$k "$NEW_BIN" \
            llama-3.1-8b dense,2:4,8:16 1,2,4,16
    done
    ab_pack
done
for k in 1 2 3; do
    ab_decode old-q32-$k "$OLD_BIN" qwen3-32b dense,2:4 1
    ab_decode new-q32-$k "$NEW_BIN" qwen3-32b dense,2:4 1
    ab_pack
done
ab_decode old-70b "$OLD_BIN" llama-3.3-70b 2:4 1
ab_decode new-70b "$NEW_BIN" llama-3.3-70b 2:4 1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$R/gpu.txt" 2>&1
ab_pack
