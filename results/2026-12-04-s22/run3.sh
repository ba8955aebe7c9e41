#!/usr/bin/env bash
# results/2026-12-04-s22/run3.sh: test_cuda_backend three times (its batch-vs-single check now
# tolerates one near-tie, as its CPU comparison does: r2 saw a 2:4 pick flip), then the warm-up
# against no warm-up on one 2:4 checkpoint in one call: steady load at 4 and 64 req/s, first with
# --warmup false, then with the default.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-04-s22/run3.sh
source tools/gpu_ab.sh
tar xJf results/tmp/llama3.tar.xz -C results/tmp
ab_build
for k in 1 2 3; do
    ab_test cuda_backend-$k build/gpu/tests/engine/test_cuda_backend
done
grep -h "picks\|FAIL" "$R"/test-cuda_backend-*.log >"$R/near-ties.txt"
ab_pack
source tools/gpu/lib.sh # steady_load, steady_table
B=build/gpu RATES=4,64 N=128 PORT=18283 OUTLEN=128
python3 tools/synth_ckpt.py --config config/presets/llama-3.1-8b.json --tokenizer results/tmp/llama3 \
    --out /tmp/ck2of4 --pattern 2:4 >"$R/synth.log" 2>&1
ab_note "synth 2:4 rc=$? $(ab_el) s"
for v in nowarm warm; do
    extra=""
    [ $v = nowarm ] && extra="--warmup false"
    SERVE_EXTRA="$extra" steady_load "$R/steady-$v" /tmp/ck2of4 200 --timeout 180
    ab_note "steady $v rc=$? $(ab_el) s: $(grep -o 'ready at .* after [0-9]* s' "$R/steady-$v.log")"
    steady_table "$R/steady-$v" >>"$R/summary.txt"
    ab_pack
done
