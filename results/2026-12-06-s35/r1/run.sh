#!/usr/bin/env bash
# results/2026-12-06-s35/r1/run.sh: (1) the dense tensor-core GEMV's first step before its PDL
# wait (sd_nm_spmv_args.early) checked against the reference and bit for bit against the plain
# kernel (test_spmv_gpu), the engine's tests with it on everywhere; (2) 8B decode at batch 1,
# dense and 2:4, one tuning cache, alternated three times: the default (no early loads),
# SD_NM_TC_EARLY=1 (only after a norm or the attention) with registers capped for 4 blocks an SM,
# the same uncapped (sparsed-minb0: nm_spmv_tc.cu -DSD_TC_EARLY_MINB=0, 72 registers), =2 (before
# every dense linear), and the attention's key chunk floor at 128 and 256 keys (SD_ATTN_CHUNK,
# default 64); then batch 16 once for the early modes.
# Binaries prebuilt here (make BUILD=build/gpu ...; the variant linked from build/gpu/tc_minb0.o
# before libsparsed.a), packed into results/tmp/bins.tar.xz; on the device (carry .debs,
# results/tmp): bash results/2026-12-06-s35/r1/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_have
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-540}
P8=config/presets/llama-3.1-8b.json
prebuilt_start
SD_TEST_ONLY=tc_early ab_test tc_early build/gpu/tests/kernels/test_spmv_gpu 120
SD_TEST_ONLY=dense_gemv ab_test dense_gemv build/gpu/tests/kernels/test_spmv_gpu 120
SD_NM_TC_EARLY=2 ab_test cuda_backend-early2 build/gpu/tests/engine/test_cuda_backend 120
SD_NM_TC_EARLY=2 ab_test swiglu_fuse-early2 build/gpu/tests/engine/test_swiglu_fuse_gpu 120

# dec NAME BIN BATCH ENV...: bench decode dense,2:4 on the shared tuning cache
dec() {
    local name=$1 bin=$2 batch=$3
    shift 3
    ab_have 25 "decode $name" || return 0
    env "$@" timeout 90 "$bin" bench decode --preset "$P8" --pattern dense,2:4 --batch "$batch" \
        --tune-cache "$R/tune.json" --out "$R/decode-$name.md" >/dev/null 2>"$R/decode-$name.err"
    ab_note "decode $name rc=$? $(ab_el) s"
    grep -E '^\| (dense|[0-9]+:[0-9]+) ' "$R/decode-$name.md" | sed "s/^/$name /" >>"$R/summary.txt"
}
B=build/gpu/sparsed
dec tune-0 $B 1 SD_X=1
for k in 1 2 3; do
    dec base-$k $B 1 SD_X=1
    dec sel-$k $B 1 SD_NM_TC_EARLY=1
    dec selu-$k build/gpu/sparsed-minb0 1 SD_NM_TC_EARLY=1
    dec all-$k $B 1 SD_NM_TC_EARLY=2
    dec ch128-$k $B 1 SD_ATTN_CHUNK=128
    dec ch256-$k $B 1 SD_ATTN_CHUNK=256
done
dec tune-16 $B 16 SD_X=1
dec base-16 $B 16 SD_X=1
dec sel-16 $B 16 SD_NM_TC_EARLY=1
dec all-16 $B 16 SD_NM_TC_EARLY=2
python3 tools/ab_summary.py "$R" --base base >"$R/ab.txt" 2>&1
ab_pack
cp "$R"/ab.txt "$R"/summary.txt "$R"/gpu.txt "$R"/*.md "$R"/*.log "$OUT"/ 2>/dev/null
cat "$R/summary.txt" "$R/ab.txt"
