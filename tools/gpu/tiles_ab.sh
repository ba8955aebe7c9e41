#!/usr/bin/env bash
# (Ran in results/2026-12-05-s25 r0-r2, on a0e22a6 / 673869b; the slices have been removed since, so
# its slice16 step now runs what tiles0 does. tools/gpu/defaults_check.sh checks the defaults chosen.)
# tools/gpu/tiles_ab.sh: the first GPU run of the tiled wide kernels (65-256 rows of a 2:4 .. 16:32
# linear, SD_NM_TILES=1), of the vectorised bitmask expansion before cuBLAS (engine/cuda_ops.cu) and
# of that expansion in L2-sized slices (SD_EXPAND_SLICE_KB), and of 2:4 GEMMs on cuSPARSELt
# (SD_CUSPARSELT=1), all written without a device (kernels/NOTES.md v29, v30). Two calls of ~6
# minutes, AB_PARTS="tests prefill" then AB_PARTS=steady (each step packs its results as it
# finishes, so a run cut short keeps what it measured):
#   1. every GPU test binary (ab_gpu_tests): test_spmv_gpu / test_sp24_gpu check B = 65-256 per
#      config, test_cuda_backend 2:4 prefills of 65-200 tokens with tiles on and with sliced
#      expansion, and all its prefills of more than 64 rows (the new expansion) against the CPU
#      backend. A failure stops the run. Apart (cuSPARSELt is the newest and least certain path, so
#      its failure only drops its own timings): test_cslt (the module against an fp64 reference)
#      and test_cuda_backend's cuSPARSELt prefills (SD_TEST_ONLY=cslt; the run above SD_TEST_SKIP=cslt).
#   2. `sparsed bench gemm`: each 8B linear's GEMM at 128-2048 rows, dense cuBLAS beside 2:4's
#      expansion + cuBLAS and cuSPARSELt (default and searched configs), one table;
#      `sparsed bench prefill` at Llama-3.1-8B shapes, chunks of 64-2048 tokens, dense, 2:4 and
#      8:16 with tiles off, then 2:4 and 8:16 with tiles on (SD_TUNE_LOG=1: the first-use lines put
#      the tiled kernel and cuBLAS on expanded weights side by side for every shape at 128-256 rows),
#      then 2:4 with tiles off and the expansion in 16 MB slices read back from L2 (SD_EXPAND_SLICE_KB),
#      then 2:4 on cuSPARSELt (SD_CUSPARSELT=1, its library found through python3's PyTorch), and
#      with the library's search for each shape's algorithm config (SD_CUSPARSELT=2);
#   3. a random 2:4 bitmask checkpoint at those shapes (tools/synth_ckpt.py --pattern) under the
#      steady load at 64 and 128 req/s (128-token prompts: steps of 65-192 rows), tiles off, tiles
#      on, then cuSPARSELt.
# Run from the repo root of a tree whose binaries were prebuilt here, with the tokenizer packed:
#   tools/gpu/prebuild.sh build/gpu/sparsed $(for t in kernels/test_spmv_gpu kernels/test_sp24_gpu \
#       kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend \
#       engine/test_tune_cache_gpu engine/test_attn_fused_gpu engine/test_cslt; do echo build/gpu/tests/$t; done)
#   tar cJf results/tmp/llama3.tar.xz -C ../shared/tokenizers llama3
# then on the device
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 AB_PARTS="tests prefill" bash tools/gpu/tiles_ab.sh
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 AB_PARTS=steady bash tools/gpu/tiles_ab.sh
# carry: .debs, results/tmp (bins.tar.xz, llama3.tar.xz). Everything lands in $OUT/r.tgz:
# summary.txt (one line a step, the tables), tune-*.txt (the first-use lines of 64 rows and more).
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start
parts=${AB_PARTS:-tests prefill steady}
prebuilt_start
echo "cuSPARSELt: $SD_CUSPARSELT_LIB $(python3 -m pip show nvidia-cusparselt-cu13 2>/dev/null | grep ^Version)" >>"$R/gpu.txt"
cslt_ok=1

# A test log passed when its last line is "N passed, 0 failed" (a crash or a timeout leaves none).
passed() { tail -1 "$1" | grep -qE "^[0-9]+ passed, 0 failed"; }

part_tests() {
    local f t bad=0
    for t in $AB_GPU_TESTS; do
        [ "$t" = engine/test_cslt ] || SD_TEST_SKIP=cslt ab_test "${t#*/}" "build/gpu/tests/$t" 300
    done
    for f in "$R"/test-*.log; do
        passed "$f" || bad=1
    done
    if [ $bad = 1 ]; then
        ab_note "a GPU test failed: no timing (see test-*.log)"
        ab_pack
        exit 1
    fi
    ab_test cslt build/gpu/tests/engine/test_cslt 300
    SD_TEST_ONLY=cslt ab_test cuda_backend-cslt build/gpu/tests/engine/test_cuda_backend 300
    passed "$R/test-cslt.log" && passed "$R/test-cuda_backend-cslt.log" || cslt_ok=0
    ab_note "cuSPARSELt tests: $([ $cslt_ok = 1 ] && echo passed || echo FAILED: its timings are left out)"
    ab_pack
}

part_prefill() {
    local P8=config/presets/llama-3.1-8b.json CH=64,128,192,256,512,2048 v pats tiles slice cslt
    # each 8B linear's GEMM at 128-2048 rows: dense, 2:4 expansion + cuBLAS, 2:4 cuSPARSELt
    timeout 240 build/gpu/sparsed bench gemm --preset $P8 --rows 128,256,512,1024,2048 \
        --out "$R/gemm-8b.md" >"$R/gemm-8b.log" 2>&1
    ab_note "bench gemm rc=$? $(ab_el) s"
    cat "$R/gemm-8b.md" >>"$R/summary.txt"
    ab_pack
    # tiles off, on; off with the expansion in 16 MB slices; cuSPARSELt, default and searched configs
    for v in tiles0 tiles1 slice16 cslt cslt2; do
        pats=2:4,8:16 tiles=0 slice=0 cslt=0
        [ $v = tiles0 ] && pats=dense,2:4,8:16
        [ $v = tiles1 ] && tiles=1
        [ $v = slice16 ] && pats=2:4 slice=16384
        [ $v = cslt ] && pats=2:4 cslt=1
        [ $v = cslt2 ] && pats=2:4 cslt=2
        [ $cslt != 0 ] && [ $cslt_ok = 0 ] && continue
        SD_NM_TILES=$tiles SD_EXPAND_SLICE_KB=$slice SD_CUSPARSELT=$cslt SD_TUNE_LOG=1 timeout 200 \
            build/gpu/sparsed bench prefill \
            --preset $P8 --pattern $pats --chunk $CH --out "$R/prefill-$v.md" >/dev/null 2>"$R/prefill-$v.err"
        ab_note "bench prefill $v rc=$? $(ab_el) s"
        cat "$R/prefill-$v.md" >>"$R/summary.txt"
        grep -E "^tune: .* (6[4-9]|[7-9][0-9]|[12][0-9][0-9]) rows" "$R/prefill-$v.err" >"$R/tune-prefill-$v.txt"
        ab_pack
    done
}

part_steady() {
    local name t cslt
    B=build/gpu RATES=64,128 N=128 PORT=18284 OUTLEN=128
    python3 tools/synth_ckpt.py --config config/presets/llama-3.1-8b.json --tokenizer results/tmp/llama3 \
        --out /tmp/ck2of4 --pattern 2:4 >"$R/synth.log" 2>&1
    ab_note "synth 2:4 rc=$? $(ab_el) s"
    for name in tiles0 tiles1 cslt; do
        t=0 cslt=0
        [ $name = tiles1 ] && t=1
        [ $name = cslt ] && cslt=1
        SD_NM_TILES=$t SD_CUSPARSELT=$cslt SD_TUNE_LOG=1 steady_load "$R/steady-$name" /tmp/ck2of4 150 --timeout 120
        ab_note "steady $name rc=$? $(ab_el) s: $(grep -o 'ready at .* after [0-9]* s' "$R/steady-$name.log")"
        steady_table "$R/steady-$name" >>"$R/summary.txt"
        grep -E "^tune: .* (6[4-9]|[7-9][0-9]|[12][0-9][0-9]) rows" "$R/steady-$name/server.log" >"$R/tune-$name.txt"
        ab_pack
    done
}

for p in $parts; do
    "part_$p"
done
