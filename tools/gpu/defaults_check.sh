#!/usr/bin/env bash
# tools/gpu/defaults_check.sh: the defaults that tiles_ab.sh's numbers chose (kernels/NOTES.md v31),
# checked in one device call of ~7 minutes: the wide kernels in tiles up to 256 rows (SD_NM_TILES
# unset) and 2:4 GEMMs of more than 64 rows on cuSPARSELt with searched configs (SD_CUSPARSELT
# unset). Steps, each packed into $OUT/r.tgz as it ends:
#   1. every GPU test binary (and test_warmup), with the defaults;
#   2. `sparsed bench prefill` at Llama-3.1-8B shapes, dense / 2:4 / 8:16, chunks of 64-2048 tokens;
#   3. `sparsed bench decode` dense / 2:4 at batch 1, 64 and 128 (the tiles run decode batches of
#      65-256; cuSPARSELt never runs inside the decode graphs);
#   4. the steady load at 64 and 128 req/s on random dense and 2:4 checkpoints of those shapes.
# Run from the repo root with the binaries prebuilt here (tools/gpu/prebuild.sh, the list of
# tiles_ab.sh plus build/gpu/tests/engine/test_warmup) and the tokenizer packed:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/defaults_check.sh
# carry: .debs, results/tmp.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, steady_load, steady_table
P8=config/presets/llama-3.1-8b.json
prebuilt_start

for t in $AB_GPU_TESTS engine/test_warmup; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 300
done
ab_pack

SD_TUNE_LOG=1 timeout 150 build/gpu/sparsed bench prefill --preset $P8 --pattern dense,2:4,8:16 \
    --chunk 64,128,192,256,512,2048 --out "$R/prefill.md" >/dev/null 2>"$R/prefill.err"
ab_note "bench prefill rc=$? $(ab_el) s"
cat "$R/prefill.md" >>"$R/summary.txt"
ab_pack

timeout 150 build/gpu/sparsed bench decode --preset $P8 --pattern dense,2:4 --batch 1,64,128 \
    --out "$R/decode.md" >/dev/null 2>"$R/decode.err"
ab_note "bench decode rc=$? $(ab_el) s"
cat "$R/decode.md" >>"$R/summary.txt"
ab_pack

B=build/gpu RATES=64,128 N=128 PORT=18284 OUTLEN=128
for p in dense 2:4; do
    name=${p/:/of}
    python3 tools/synth_ckpt.py --config $P8 --tokenizer results/tmp/llama3 --out /tmp/ck-$name \
        $([ $p = dense ] || echo --pattern $p) >"$R/synth-$name.log" 2>&1
    ab_note "synth $p rc=$? $(ab_el) s"
    steady_load "$R/steady-$name" /tmp/ck-$name 150 --timeout 120
    ab_note "steady $p rc=$? $(ab_el) s: $(grep -o 'ready at .* after [0-9]* s' "$R/steady-$name.log")"
    grep -m2 'cuSPARSELt' "$R/steady-$name/server.log" >>"$R/summary.txt"
    steady_table "$R/steady-$name" >>"$R/summary.txt"
    rm -rf /tmp/ck-$name
    ab_pack
done
