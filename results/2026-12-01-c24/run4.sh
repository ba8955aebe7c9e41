#!/usr/bin/env bash
# Eighth session, fourth GPU call: run3 had 8B 2:4 at batch 64 at 11.53 ms against 10.33 in the
# seventh session's run. The compacting kernel only takes batch 1, so: the tree before this
# session (edc5eeb, carried as results/tmp/snapold) against this one, alternated, 2:4 at batch
# 16 and 64 (dense beside it), with the engine's tuning log of the last pair.
#   OLD=results/tmp/snapold bash results/2026-12-01-c24/run4.sh    (.debs and results/tmp/snapold carried)
source tools/gpu_ab.sh
ab_build
for k in 1 2 3; do
    ab_decode old$k "$OLD_BIN" llama-3.1-8b dense,2:4 1,16,64
    ab_decode new$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16,64
    ab_pack
done
SD_TUNE_LOG=1 ab_decode oldlog "$OLD_BIN" llama-3.1-8b 2:4 64
grep "^tune:" "$R/decode.log" >"$R/tune-old.txt"
SD_TUNE_LOG=1 ab_decode newlog "$NEW_BIN" llama-3.1-8b 2:4 64
grep "^tune:" "$R/decode.log" | tail -n +$(($(wc -l <"$R/tune-old.txt") + 1)) >"$R/tune-new.txt"
ab_pack
