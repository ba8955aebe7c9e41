#!/usr/bin/env bash
# Eighth session, fifth GPU call: run4 confirmed 8B 2:4 at batch 64 slower in this session's tree
# (11.6 ms against 10.4-10.6 for edc5eeb, alternated three times), with the wide kernel's tuning
# timings 15-60% slower, although its code did not change. Which part: prof_spmv of the wide kernel
# (rw 128) in both builds, and decode with SD_NM_C24=0.
#   OLD=results/tmp/snapold bash results/2026-12-01-c24/run5.sh    (.debs and results/tmp/snapold carried)
source tools/gpu_ab.sh
make -j16 BUILD=build/gpu build/gpu/sparsed build/gpu/tools/prof_spmv >"$R/build.log" 2>&1 &
(cd "$OLD" && make -j16 BUILD=build/gpu build/gpu/sparsed build/gpu/tools/prof_spmv >"$R/build-old.log" 2>&1) &
wait
ab_note "build $(ab_el) s"
for k in 1 2; do
    for t in old new; do
        P=build/gpu/tools/prof_spmv
        [ $t = old ] && P=$OLD/build/gpu/tools/prof_spmv
        for shp in "6144 4096" "4096 4096" "28672 4096" "4096 14336"; do
            for sp in 1 2 4; do
                echo "$t$k 2:4 $shp B=64 rw=128 split $sp: $(timeout 60 $P 2:4 $shp 64 128 $sp 100 2>&1 | tail -1)" >>"$R/prof.txt"
            done
        done
    done
done
ab_note "prof $(ab_el) s"
ab_pack
for k in 1 2; do
    ab_decode old$k "$OLD_BIN" llama-3.1-8b 2:4 64
    SD_NM_C24=0 ab_decode newoff$k "$NEW_BIN" llama-3.1-8b 2:4 64
    ab_decode new$k "$NEW_BIN" llama-3.1-8b 2:4 64
done
ab_pack
