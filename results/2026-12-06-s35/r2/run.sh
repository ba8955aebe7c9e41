#!/usr/bin/env bash
# results/2026-12-06-s35/r2/run.sh: the down projection in K slices that start as the fused
# gate_up writes their columns (kernels/nm_sig.cuh, SD_DOWN_SLICES). (1) GPU tests: test_sig_gpu
# (the kernels' signals, dense and 2:4) and its memcheck, test_down_slices_gpu (decode logits with
# and without slices), and the tests of the kernels and paths it touches; (2) 8B decode at batch 1,
# dense and 2:4, one tuning cache, SD_DOWN_SLICES 0 (off) / 2 / 4 / 8 alternated three times; then
# batch 2 and 8 once.
# Binaries prebuilt here (make BUILD=build/gpu ...), packed into results/tmp/bins.tar.xz; on the
# device (carry .debs, results/tmp): bash results/2026-12-06-s35/r2/run.sh
tar xJf results/tmp/bins.tar.xz
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_have
export AB_PREBUILT=1 AB_LIMIT_S=${AB_LIMIT_S:-540}
P8=config/presets/llama-3.1-8b.json
prebuilt_start
ab_test sig_gpu build/gpu/tests/kernels/test_sig_gpu 120
ab_test down_slices_gpu build/gpu/tests/engine/test_down_slices_gpu 120
ab_memcheck build/gpu/tests/kernels/test_sig_gpu sig_2_4
for t in kernels/test_spmv_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend \
    kernels/test_sp24_gpu; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 150
done
grep -h "down launches waited" "$R"/test-down_slices_gpu.log >>"$R/summary.txt"

# dec NAME BATCH ENV...: bench decode dense,2:4 on the shared tuning cache
dec() {
    local name=$1 batch=$2
    shift 2
    ab_have 25 "decode $name" || return 0
    env "$@" timeout 90 build/gpu/sparsed bench decode --preset "$P8" --pattern dense,2:4 --batch "$batch" \
        --tune-cache "$R/tune.json" --out "$R/decode-$name.md" >/dev/null 2>"$R/decode-$name.err"
    ab_note "decode $name rc=$? $(ab_el) s"
    grep -E '^\| (dense|[0-9]+:[0-9]+) ' "$R/decode-$name.md" | sed "s/^/$name /" >>"$R/summary.txt"
}
dec tune-0 1 SD_X=1
for k in 1 2 3; do
    dec base-$k 1 SD_DOWN_SLICES=0
    dec s2-$k 1 SD_DOWN_SLICES=2
    dec s4-$k 1 SD_DOWN_SLICES=4
    dec s8-$k 1 SD_DOWN_SLICES=8
done
dec tune-4 2 SD_X=1
dec base-4 2 SD_DOWN_SLICES=0
dec s4-4 2 SD_DOWN_SLICES=4
dec tune-5 8 SD_X=1
dec base-5 8 SD_DOWN_SLICES=0
dec s4-5 8 SD_DOWN_SLICES=4
python3 tools/ab_summary.py "$R" --base base >"$R/ab.txt" 2>&1
ab_pack
cp "$R"/ab.txt "$R"/summary.txt "$R"/gpu.txt "$OUT"/ 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$R" . 2>/dev/null
cat "$R/summary.txt" "$R/ab.txt"
