#!/usr/bin/env bash
# results/2026-12-02-s14/run5.sh (tree 2faffdf; build/gpuW2: the same with -DSD_ATTN_WARPS=2):
# does the attention's register footprint hold the o projection back? r3: the o projection at the
# register-capped config (103, 16K registers a block) made 2:4 batch-1 steps 1.3% faster than the
# tuned 102 (32K), which cannot be resident beside two attention blocks (2 x 21.5K). With two
# warps a block (64 keys a split: a tile a warp, as now) the attention holds half. GPU tests of
# the variant, then 8B decode on r1's tunings (and r3's o103), alternated twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-02-s14/run5.sh
source tools/gpu_ab.sh
ab_build
W2=build/gpuW2/sparsed
ab_test attn_fused_gpu_w2 build/gpuW2/tests/engine/test_attn_fused_gpu 300
ab_test cuda_backend_w2 build/gpuW2/tests/engine/test_cuda_backend 300
ab_test attn_fused_gpu build/gpu/tests/engine/test_attn_fused_gpu 300
ab_pack
T=results/2026-12-02-s14/r1
O=$R/o103.json
python3 results/2026-12-02-s14/tune_edit.py $T/tune-2-4.json $O 4096:4096=103/1
for k in 1 2; do
    for v in base w2; do
        bin=$NEW_BIN
        [ $v = w2 ] && bin=$W2
        AB_DECODE_ARGS="--tune-cache $T/tune-2-4.json" ab_decode $v-$k $bin llama-3.1-8b 2:4 1,4,16
        AB_DECODE_ARGS="--tune-cache $O" ab_decode ${v}o103-$k $bin llama-3.1-8b 2:4 1
        AB_DECODE_ARGS="--tune-cache $T/tune-dense.json" ab_decode $v-$k $bin llama-3.1-8b dense 1,4,16
        AB_DECODE_ARGS="--tune-cache $T/tune-8-16.json" ab_decode $v-$k $bin llama-3.1-8b 8:16 1
    done
    ab_pack
done
