#!/usr/bin/env bash
# GPU measurements waiting for device time. Written in the fifth session, which had none: the
# 2:4 / 4:8 register-expanding tensor-core kernels (kernels/NOTES.md v8) have compiled and passed
# the CPU emulation, never a GPU. Run on the GPU machine from the repo root, .debs carried, in
# two calls (each stays under the 600 s limit; everything comes back as $OUT/r.tgz); the same
# binary measures both sides, since SD_NM_TCX=1 / --tcx switch the kernels in. Afterwards copy
# this script and what it wrote into results/<date>/, and empty the list below of what ran.
#   bash tools/gpu_pending.sh 1    # build, correctness, kernel tables, memcheck (< 10 min)
#   bash tools/gpu_pending.sh 2    # decode, Llama-3.1-8B synthetic, with and without, alternated
source tools/gpu_ab.sh
case "${1:-1}" in
1)
    ab_build
    ab_test tcx-emulated build/gpu/tests/kernels/test_nm_tcx 60
    ab_test spmv-gpu build/gpu/tests/kernels/test_spmv_gpu 200
    SD_NM_TCX=1 ab_test cuda-backend-tcx build/gpu/tests/engine/test_cuda_backend 120
    for k in 1 2; do
        ab_kernels base$k "$NEW_BIN" --quick --reps 20
        ab_kernels tcx$k "$NEW_BIN" --quick --reps 20 --tcx
    done
    ab_pack # what ran so far, in case the memory check below outlives the call
    # out-of-bounds accesses of the new kernels (compute-sanitizer runs on Firecracker hosts only)
    SD_TEST_ONLY=tcx timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/gpu/tests/kernels/test_spmv_gpu >"$R/memcheck-tcx.log" 2>&1
    ab_note "memcheck tcx rc=$? $(ab_el) s: $(tail -1 "$R/memcheck-tcx.log")"
    ;;
2)
    test -x "$NEW_BIN" || ab_build
    for k in 1 2; do
        ab_decode base$k "$NEW_BIN" llama-3.1-8b dense,2:4,4:8 1,4,16,64
        SD_NM_TCX=1 ab_decode tcx$k "$NEW_BIN" llama-3.1-8b 2:4,4:8 1,4,16,64
    done
    ab_pack
    # stage 1 found a wrong test config (split-K with bf16 output, which every kernel refuses)
    SD_TEST_ONLY=tcx ab_test spmv-gpu-tcx build/gpu/tests/kernels/test_spmv_gpu 200
    ab_pack
    ab_kernels full-tcx "$NEW_BIN" --tcx --reps 30
    ab_pack
    SD_TEST_ONLY=tcx timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
        build/gpu/tests/kernels/test_spmv_gpu >"$R/memcheck-tcx.log" 2>&1
    ab_note "memcheck tcx rc=$? $(ab_el) s: $(tail -1 "$R/memcheck-tcx.log")"
    ;;
esac
ab_pack
