#!/usr/bin/env bash
# tools/gpu/v37c_check.sh: (1) the capped K-tile (rows_per_warp 5) forced on the 8B down projection
# through the tune cache: decode at batch 1 tuned once (tune.json), then the same choices with the
# down projection's 4:8 / 8:16 / 16:32 entries at batch 1 rewritten to rw 5 split 1 (tune-kt.json),
# alternated twice, so the in-step time of the kernel that prof_spmv timed 17% faster back to back
# is measured whatever first use's single launches pick; (2) where the batch-1 step goes on this
# GPU: dense, 2:4 and 8:16 with SD_BENCH_SKIP=small (the linears, embedding and lm_head alone) and
# =linears (everything but the linears).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/v37c_check.sh
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, ab_bench
P8=config/presets/llama-3.1-8b.json
prebuilt_start
export AB_LIMIT_S=${AB_LIMIT_S:-420} AB_BENCH_MIN=25 AB_BENCH_TIMEOUT=60
ab_bench tune-0 decode SD_X=1 -- --pattern 4:8,8:16,16:32 --batch 1 --tune-cache "$R/tune.json"
python3 - "$R/tune.json" "$R/tune-kt.json" <<'PY' | tee -a "$R/summary.txt"
import json, sys
c = json.load(open(sys.argv[1]))
for e in c["kernels"]:
    if not e["dense"] and e["m"] in (8, 16, 32) and e["rows"] == 4096 and e["cols"] == 14336 and e["B"] == 1:
        print("forced rw 5:", e["n"], e["m"], "was rw", e["rows_per_warp"], "split", e["split"])
        e["rows_per_warp"], e["split"] = 5, 1
json.dump(c, open(sys.argv[2], "w"))
PY
for round in 1 2; do
    cp "$R/tune.json" "$R/t-def.json"
    cp "$R/tune-kt.json" "$R/t-kt.json"
    ab_bench def-$round decode SD_X=1 -- --pattern 4:8,8:16,16:32 --batch 1 --tune-cache "$R/t-def.json"
    ab_bench kt-$round decode SD_X=1 -- --pattern 4:8,8:16,16:32 --batch 1 --tune-cache "$R/t-kt.json"
done
ab_bench skip-small decode SD_BENCH_SKIP=small -- --pattern dense,2:4,8:16 --batch 1
ab_bench skip-linears decode SD_BENCH_SKIP=linears -- --pattern dense,2:4,8:16 --batch 1
ab_bench full decode SD_X=1 -- --pattern dense,2:4,8:16 --batch 1
