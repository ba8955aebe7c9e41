#!/usr/bin/env bash
# Fourth session, last GPU call (one H200): the README's decode table at the session's final
# tree: synthetic Llama-3.1-8B, every pattern, B = 1, 4, 16, 64, context 512 (and the dense/2:4
# batch-1 pair twice more, to show the run-to-run spread), Llama-3.3-70B 2:4 on one GPU, and
# sparsed bench kernels --quick.
#   bash results/2026-11-30-s4/run6.sh     (repo root; .debs carried)
set -uo pipefail
OUT=${OUT:-/tmp/out}
R=$OUT/r
mkdir -p "$R"
source tools/device_env.sh
B=build/gpu
start=$(date +%s)
el() { echo $(($(date +%s) - start)); }
make -j16 BUILD=$B all >"$R/build.log" 2>&1
echo "build rc=$? $(el) s" | tee -a "$R/summary.txt"
bench() { # name preset patterns batches
    timeout 200 $B/sparsed bench decode --preset config/presets/$2.json --pattern $3 --batch $4 --ctx 512 \
        --out "$R/decode-$1.md" >>"$R/decode.log" 2>&1
    echo "decode $1 rc=$? $(el) s" | tee -a "$R/summary.txt"
    grep -E '^\| [a-z0-9:]+ ' "$R/decode-$1.md" | grep -v pattern | sed "s/^/$1 /" >>"$R/summary.txt"
}
bench 8b-all llama-3.1-8b all 1,4,16,64
bench 8b-b1-a llama-3.1-8b dense,2:4 1
bench 8b-b1-b llama-3.1-8b dense,2:4 1
bench 70b-2of4 llama-3.3-70b 2:4 1,16
timeout 150 $B/sparsed bench kernels --quick --reps 30 --out "$R/kern.md" >/dev/null 2>"$R/kern.err"
echo "kernels rc=$? $(el) s" | tee -a "$R/summary.txt"
tar czf "$OUT/r.tgz" -C "$OUT" r
