#!/usr/bin/env bash
# Eleventh session, fourth GPU call (the budget's last minutes): the cluster policy as committed
# (grid within two blocks per SM) against no clusters, Llama-3.1-8B batch 1 and 2, on one tuning
# cache; batch 2 should now match SD_ATTN_CLUSTER=0 and batch 1 keep its ~1%. Builds only the
# daemon and the fused attention test.
#   bash results/2026-12-02-tune/run4.sh    (.debs carried)
source tools/gpu_ab.sh
make -j16 BUILD=build/gpu build/gpu/sparsed build/gpu/tests/engine/test_attn_fused_gpu >"$R/build.log" 2>&1
ab_note "build $(ab_el) s: $(test -x "$NEW_BIN" && echo ok || echo FAILED)"
ab_test attn_fused build/gpu/tests/engine/test_attn_fused_gpu 100
export AB_DECODE_ARGS="--tune-cache $R/tune.json"
ab_decode fill "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,2
for k in 1 2; do
    SD_ATTN_CLUSTER=0 ab_decode cl0-$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,2
    ab_decode cl1-$k "$NEW_BIN" llama-3.1-8b dense,2:4,8:16 1,2
done
ab_pack
