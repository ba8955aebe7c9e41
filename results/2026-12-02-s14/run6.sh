#!/usr/bin/env bash
# results/2026-12-02-s14/run6.sh: the SwiGLU in the row-per-lane kernel's epilogue (8:16 / 16:32
# gate_up at batch 1-4 take that kernel): GPU tests and memcheck, then 8B decode with
# SD_SWIGLU_FUSE=2 (fused wherever the kernel takes it, the row-per-lane kernel included) against
# the default (1: not the row-per-lane or gather kernels), 8:16 and 16:32 at batch 1, 2, 4,
# alternated twice on one tuning per pattern; and the 8:16 o / qkv projections at other configs
# (tune_edit.py on r1's tuning), as r3 found for the 2:4 o projection.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s14/run6.sh
source tools/gpu_ab.sh
ab_build
ab_test swiglu_gpu build/gpu/tests/kernels/test_swiglu_gpu 300
ab_test swiglu_fuse_gpu build/gpu/tests/engine/test_swiglu_fuse_gpu 300
ab_test spmv_gpu build/gpu/tests/kernels/test_spmv_gpu 300
ab_pack
timeout 300 compute-sanitizer --tool memcheck build/gpu/tests/kernels/test_swiglu_gpu >"$R/memcheck.log" 2>&1
ab_note "memcheck swiglu_gpu rc=$? $(grep -c 'ERROR SUMMARY: 0 errors' "$R/memcheck.log") clean, $(tail -1 "$R/memcheck.log")"
ab_pack
T=results/2026-12-02-s14/r1
cp $T/tune-8-16.json $R/tune-8-16.json
for k in 1 2; do
    for pat in 8:16 16:32; do
        tc="--tune-cache $R/tune-${pat/:/-}.json"
        AB_DECODE_ARGS="$tc" ab_decode sw1-$k "$NEW_BIN" llama-3.1-8b $pat 1,2,4
        AB_DECODE_ARGS="$tc" SD_SWIGLU_FUSE=2 ab_decode sw2-$k "$NEW_BIN" llama-3.1-8b $pat 1,2,4
    done
    ab_pack
done
E=results/2026-12-02-s14/tune_edit.py
V=$R/tunes
mkdir -p $V
python3 $E $T/tune-8-16.json $V/o1s2.json 4096:4096=1/2
python3 $E $T/tune-8-16.json $V/o2s2.json 4096:4096=2/2
python3 $E $T/tune-8-16.json $V/o32s1.json 4096:4096=32/1
python3 $E $T/tune-8-16.json $V/o32s2.json 4096:4096=32/2
python3 $E $T/tune-8-16.json $V/qkv32.json 6144:4096=32/1
python3 $E $T/tune-8-16.json $V/down2s4.json 4096:14336=2/4
for k in 1 2; do
    AB_DECODE_ARGS="--tune-cache $T/tune-8-16.json" ab_decode e816base-$k "$NEW_BIN" llama-3.1-8b 8:16 1
    for v in o1s2 o2s2 o32s1 o32s2 qkv32 down2s4; do
        AB_DECODE_ARGS="--tune-cache $V/$v.json" ab_decode e816$v-$k "$NEW_BIN" llama-3.1-8b 8:16 1
    done
    ab_pack
done
