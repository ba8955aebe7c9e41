#!/usr/bin/env bash
# Eighth session, second GPU call: variants of the compacting 2:4 kernel against the first
# (rows per warp, words in flight per lane, a register cap for 4 blocks per SM), prof_spmv
# back-to-back launches on the 8B and 70B shapes. Temporary codes: 105 = 1 row, 2 words, <= 64
# registers; 106 = 2 rows, 2 words; 107 = 1 row, 1 word, <= 64 registers.
#   bash results/2026-12-01-c24/run2.sh
source tools/gpu_ab.sh
make -j16 BUILD=build/gpu build/gpu/tools/prof_spmv >"$R/build.log" 2>&1
ab_note "build $(ab_el) s"
P=build/gpu/tools/prof_spmv
for shp in "6144 4096" "4096 4096" "28672 4096" "4096 14336" "10240 8192" "8192 8192" "57344 8192" "8192 28672"; do
    for cfg in "101 1" "102 1" "104 1" "105 1" "106 1" "107 1" "105 2" "106 2"; do
        echo "2:4 $shp rw/split $cfg: $(timeout 60 $P 2:4 $shp 1 $cfg 300 2>&1 | tail -1)" >>"$R/prof.txt"
    done
done
ab_note "prof done $(ab_el) s"
ab_pack
