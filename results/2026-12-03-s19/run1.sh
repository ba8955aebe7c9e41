#!/usr/bin/env bash
# results/2026-12-03-s19/run1.sh: (a) the decode attention's splits push their partials into the
# cluster's rank 0 (push_merge) instead of rank 0 pulling them over distributed shared memory
# between two cluster barriers; (b) the 8:16 expansion looks each nibble's table entry up once
# (nm_tcx.h sd_tcx816_expand; PTX: 176 -> 128 / 546 -> 402 ld.shared.v2 in nm_spmv_tc / tcw);
# (c) the gather kernels stage x lane-major (nm_spmv.cu x_word: a lane's gathers in its own bank).
# GPU tests (attention bits cluster vs global; SpMV), memcheck of both; SASS of the batch-1
# kernels; back-to-back timings of the gather kernels (8:16, 16:32 at 1-2 vectors) and of 8:16's
# expanding kernels, old (ebffe2e: results/tmp/old_*) against new alternated twice; 8B decode,
# every pattern but 4:8 at batch 1-64 (context 512) and dense / 2:4 at 1 (context 2048), old
# against new alternated twice on one tuning cache (the same kernels).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s19/run1.sh
source tools/gpu_ab.sh
ab_build
ab_test test_attn_fused_gpu build/gpu/tests/engine/test_attn_fused_gpu 300
ab_test test_spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_note "tcx: $(grep -E 'tcx .*worst|FAIL|not ok' "$R/test-test_spmv_gpu.log" | head -8 | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool memcheck build/gpu/tests/engine/test_attn_fused_gpu >"$R/memcheck-attn.log" 2>&1
ab_note "memcheck attn rc=$? $(tail -1 "$R/memcheck-attn.log")"
for t in gpu_8_16 gpu_c24; do # the gather kernel: 8:16's configs; the corrupt masks of the c24 test
    SD_TEST_ONLY=$t timeout 200 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_spmv_gpu \
        >"$R/memcheck-$t.log" 2>&1
    ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
done
# SASS of the batch-1 kernels in question (no cuobjdump on the build machine): 8:16's gather kernel
# (1 vector, 1 row a warp), 2:4's compacting kernel (config 1) and the batch-1 fused attention.
CUO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$CUO" -sass build/gpu/sparsed 2>"$R/sass.err" | awk '/Function : /{p = ($0 ~ /nm_spmv_kernelILi1ELi1ELb0E|c24_spmv_kernelILi4ELi1ELi0ELi1ELb0E|attn_decode_kernelILi4ELi1ELb1ELb1E/)} p' |
    xz >"$R/sass.txt.xz"
ab_note "sass $(xz -dc "$R/sass.txt.xz" | wc -l) lines"
ab_pack
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
for k in 1 2; do
    ab_decode old-$k results/tmp/old_sparsed llama-3.1-8b dense,2:4,8:16,16:32 1,4,16,64
    ab_decode new-$k build/gpu/sparsed llama-3.1-8b dense,2:4,8:16,16:32 1,4,16,64
    ab_pack
done
for k in 1 2; do
    ab_decode old2k-$k results/tmp/old_sparsed llama-3.1-8b dense,2:4 1 2048
    ab_decode new2k-$k build/gpu/sparsed llama-3.1-8b dense,2:4 1 2048
    ab_pack
done
for k in 1 2; do
    ab_prof old-$k results/tmp/old_prof_spmv 8:16,16:32 1,2 "1:1 1:3 2:1 4:1"
    ab_prof new-$k build/gpu/tools/prof_spmv 8:16,16:32 1,2 "1:1 1:3 2:1 4:1"
    ab_prof old-$k results/tmp/old_prof_spmv 8:16 4,16,64 "24:1 128:1 256:1"
    ab_prof new-$k build/gpu/tools/prof_spmv 8:16 4,16,64 "24:1 128:1 256:1"
    ab_pack
done
ab_note "done $(ab_el) s"
ab_pack
