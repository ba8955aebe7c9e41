#!/usr/bin/env bash
# results/2026-12-03-s21/run2.sh: r1 found no host gap (launch 2-20 us, each graph on its own
# within 0.02 ms of the step) but the same graph of a sparse pattern at 2.80 ms in one process
# and 2.95-3.04 in another, or later in the same one; dense and 2:4 steady. Is it the GPU's
# clocks? nvidia-smi samples SM / memory clocks, power, temperature and the clock-event reasons
# every 100 ms (smi.csv, wall-clock stamps; the notes carry them too) while the 8B decodes every
# pattern at batch 1, three fresh processes and two on one tuning cache, and Qwen3-32B twice.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s21/run2.sh
source tools/gpu_ab.sh
ab_build
nvidia-smi -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE >"$R/smi-q.txt" 2>&1
Q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,utilization.gpu
nvidia-smi --query-gpu=$Q,clocks_event_reasons.active --format=csv -lms 100 >"$R/smi.csv" 2>&1 &
SMI=$!
sleep 1
if ! kill -0 $SMI 2>/dev/null; then # an older name of the reasons field
    nvidia-smi --query-gpu=$Q,clocks_throttle_reasons.active --format=csv -lms 100 >"$R/smi.csv" 2>&1 &
    SMI=$!
fi
all=dense,2:4,4:8,8:16,16:32
export SD_TUNE_LOG=1
for k in 1 2 3; do
    ab_note "at $(date +%T.%N)"
    ab_decode fresh-$k build/gpu/sparsed llama-3.1-8b $all 1
done
ab_pack
AB_DECODE_ARGS="--tune-cache $R/tune-8b.json"
for k in 1 2 3; do
    ab_note "at $(date +%T.%N)"
    ab_decode cache-$k build/gpu/sparsed llama-3.1-8b $all 1
done
ab_pack
AB_DECODE_ARGS="--tune-cache $R/tune-q32.json"
for k in 1 2; do
    ab_note "at $(date +%T.%N)"
    ab_decode q32-$k build/gpu/sparsed qwen3-32b dense,2:4,8:16 1 512 240
done
ab_note "at $(date +%T.%N)"
kill $SMI
grep -E "B=[0-9]+ .*ms/step" "$R/decode.log" >"$R/host.txt"
ab_note "done $(ab_el) s"
ab_pack
