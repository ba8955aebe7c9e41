#!/usr/bin/env bash
# results/2026-12-02-s14/run3.sh: (1) the step's first and last small kernels (embed8_kernel: one
# round trip; the lm_head reads act when every token is a logits row, no gather_rows): GPU test,
# then decode against 7bad867 (OLD), alternated twice on r1's tunings; (2) the linears' configs as
# the step runs them: r1's 2:4 / dense tunings with one linear's config changed
# (tune_edit.py), alternated twice; (3) the fused attention's stalls per SASS instruction.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 OLD=results/tmp/old-7bad867 bash results/2026-12-02-s14/run3.sh
source tools/gpu_ab.sh
ab_build
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend 300
T=results/2026-12-02-s14/r1
E=results/2026-12-02-s14/tune_edit.py
for k in 1 2; do
    for pat in dense 2:4; do
        tc="--tune-cache $T/tune-${pat/:/-}.json"
        AB_DECODE_ARGS="$tc" ab_decode old-$k "$OLD_BIN" llama-3.1-8b $pat 1,4
        AB_DECODE_ARGS="$tc" ab_decode new-$k "$NEW_BIN" llama-3.1-8b $pat 1,4
    done
done
ab_pack
V=$R/tunes
mkdir -p $V
python3 $E $T/tune-2-4.json $V/o103.json 4096:4096=103/1
python3 $E $T/tune-2-4.json $V/o101.json 4096:4096=101/1
python3 $E $T/tune-2-4.json $V/qkv101.json 6144:4096=101/1
python3 $E $T/tune-2-4.json $V/gu101.json 28672:4096=101/1
python3 $E $T/tune-2-4.json $V/down101.json 4096:14336=101/4
python3 $E $T/tune-2-4.json $V/downs2.json 4096:14336=103/2
python3 $E $T/tune-dense.json $V/do1.json 4096:4096=16/1
python3 $E $T/tune-dense.json $V/ddown1.json 4096:14336=16/1
ab_note "tunes: $(ls $V | tr '\n' ' ')"
for k in 1 2; do
    AB_DECODE_ARGS="--tune-cache $T/tune-2-4.json" ab_decode s24base-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    for v in o103 o101 qkv101 gu101 down101 downs2; do
        AB_DECODE_ARGS="--tune-cache $V/$v.json" ab_decode s24$v-$k "$NEW_BIN" llama-3.1-8b 2:4 1
    done
    AB_DECODE_ARGS="--tune-cache $T/tune-dense.json" ab_decode dbase-$k "$NEW_BIN" llama-3.1-8b dense 1
    for v in do1 ddown1; do
        AB_DECODE_ARGS="--tune-cache $V/$v.json" ab_decode $v-$k "$NEW_BIN" llama-3.1-8b dense 1
    done
    ab_pack
done
timeout 240 ncu --set full --clock-control none --cache-control none -k regex:attn_decode -s 300 -c 1 \
    --page source --print-source sass --csv "$NEW_BIN" bench decode --preset config/presets/llama-3.1-8b.json \
    --pattern 2:4 --batch 1 --ctx 512 --tune-cache $T/tune-2-4.json --out /tmp/x.md >"$R/ncu-attn-sass.csv" 2>&1
ab_note "ncu attn sass rc=$? $(ab_el) s"
ab_pack
