#!/usr/bin/env bash
# results/2026-12-03-s21/run5.sh: 4:8 on the sparse tensor cores as two 2:4 halves
# (kernels/nm_sp48.h, nm_spmv_sp.cu): every GPU test binary (test_sp24_gpu now runs 4:8 through
# the sp kernels, test_swiglu_gpu their SwiGLU epilogue), memcheck of the corrupt-mask test; the
# 4:8 kernels against the register-expanding one at 2-8 vectors on the 8B shapes (back to back);
# the 8B decode at batch 2, 4, 8 with the sp kernels (the autotuner's choice) against
# SD_NM_SP24=0 (without them: the tree before for 4:8), fresh tunings, alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s21/run5.sh
source tools/gpu_ab.sh
ab_build
ab_gpu_tests
ab_test gpu_sensor build/gpu/tests/engine/test_gpu_sensor
ab_memcheck build/gpu/tests/kernels/test_sp24_gpu corrupt
ab_pack
ab_prof k48 build/gpu/tools/prof_spmv 4:8 2,4,8 "24:1 24:2 32:1 25:1 25:2 27:1 27:2"
ab_prof k24 build/gpu/tools/prof_spmv 2:4 4 "25:1 27:1"
ab_pack
for k in 1 2; do
    SD_NM_SP24=0 ab_decode old-$k build/gpu/sparsed llama-3.1-8b 4:8 2,4,8
    ab_decode new-$k build/gpu/sparsed llama-3.1-8b 4:8 2,4,8
    ab_pack
done
SD_TUNE_LOG=1 ab_decode log-1 build/gpu/sparsed llama-3.1-8b 4:8 4
grep -E "B=[0-9]+ .*ms/step" "$R/decode.log" >"$R/host.txt"
ab_note "done $(ab_el) s"
ab_pack
