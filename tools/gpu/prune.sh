#!/usr/bin/env bash
# The CUDA pruning path on the GPU machine (about 3 minutes on one H200): tests/prune/
# test_prune_cuda (GPU factor, sweep and Hessians against the CPU solver; a real model; a whole
# `--device cuda` prune) and test_prune_device.py (the CLI; the GPU solver against NumPy), then
# SparseGPT timings on 8B-class linear shapes with a synthetic Hessian, CPU (all cores) against
# GPU. Run from the repo root after
#   source tools/device_env.sh && make -j32 BUILD=build/gpu all
# Writes $OUT/prune_gpu.log (test output, every bench line) and $OUT/prune_bench.md (the table).
# The CPU gets CPU_LIMIT seconds (default 90) for the 4096x14336 down_proj shape: its factorisation
# alone took longer than 280 s on 16 cores, so the table shows "> 90" there.
set -uo pipefail
OUT=${OUT:-/tmp/out}
B=${B:-build/gpu}
mkdir -p "$OUT"
LOG="$OUT/prune_gpu.log"
TAB="$OUT/prune_bench.md"
: >"$LOG"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOG" 2>&1
echo "cpu cores: $(nproc)" >>"$LOG"

echo "== test_prune_cuda" >>"$LOG"
timeout 150 "$B/tests/prune/test_prune_cuda" >>"$LOG" 2>&1
echo "test_prune_cuda rc=$?" >>"$LOG"
echo "== test_prune_device.py" >>"$LOG"
SD_BUILD="$B" timeout 60 python3 -m pytest -q -p no:cacheprovider tests/prune/test_prune_device.py >>"$LOG" 2>&1
echo "test_prune_device.py rc=$?" >>"$LOG"

bench() { # rows cols pattern device
    timeout "${5:-120}" "$B/sparsed" prune --bench-solver --rows "$1" --cols "$2" --pattern "$3" --device "$4" \
        --seed 7 2>>"$LOG" | tee -a "$LOG"
}
field() { sed -n "s/.*\"$1\": \"\{0,1\}\([^\",}]*\).*/\1/p"; }
{
    echo "SparseGPT on one linear, synthetic H (K_ij = 0.9^|i-j| with log-normal feature scales, every"
    echo "97th feature dead), damping 0.01, block 128. Seconds, wall clock: factor = clean-up + damped"
    echo "inverse Cholesky (GPU: with the upload of H), sweep = prune and update (GPU: with the W"
    echo "transfers). $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) CPU cores."
    echo
    echo "| linear [rows x cols] | pattern | CPU factor | CPU sweep | GPU factor | GPU sweep | speed-up | same masks |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$TAB"
CPU_LIMIT=${CPU_LIMIT:-90}
row() { # name rows cols pattern with_cpu [cpu timeout]
    local g c gf gs cf="-" cs="-" su="-" same="-"
    g=$(bench "$2" "$3" "$4" cuda 120)
    gf=$(echo "$g" | field factor_s)
    gs=$(echo "$g" | field sweep_s)
    if [ "$5" = 1 ]; then
        c=$(bench "$2" "$3" "$4" cpu "${6:-280}")
        cf=$(echo "$c" | field factor_s)
        cs=$(echo "$c" | field sweep_s)
        [ -n "$cs" ] || { cf="> ${6:-280} (stopped)"; cs="-"; }
        if [ "$cs" != "-" ] && [ -n "$cs" ] && [ -n "$gf" ]; then
            su=$(awk -v a="$cf" -v b="$cs" -v c="$gf" -v d="$gs" 'BEGIN { printf "%.0fx", (a + b) / (c + d) }')
            [ "$(echo "$c" | field mask_hash)" = "$(echo "$g" | field mask_hash)" ] && same=yes || same=no
        fi
    fi
    echo "| $1 [$2 x $3] | $4 | $cf | $cs | ${gf:-fail} | ${gs:-fail} | $su | $same |" >>"$TAB"
}
echo "== bench" >>"$LOG"
row "q_proj / o_proj" 4096 4096 2:4 1
row "gate_proj / up_proj" 14336 4096 2:4 1
row "gate_proj / up_proj" 14336 4096 unstructured 0
row "down_proj" 4096 14336 2:4 1 "$CPU_LIMIT"
row "down_proj" 4096 14336 16:32 0
echo >>"$TAB"
echo "(- = not run on the CPU in this script's time budget; > N = stopped after N seconds; same masks" >>"$TAB"
echo "compares a hash of all mask words.)" >>"$TAB"
cat "$TAB" >>"$LOG"
