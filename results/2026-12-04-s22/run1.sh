#!/usr/bin/env bash
# results/2026-12-04-s22/run1.sh: serving at Llama-3.1-8B shapes, dense against random 2:4 and
# 8:16 bitmask checkpoints (tools/gpu/load8b.sh on tools/synth_ckpt.py --pattern), then the kernel
# table of every pattern on the 8B shapes with issue #3's targets (bench kernels --model 8B --tp 1).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-04-s22/run1.sh
# carry: .debs, results/tmp (bins.tar.xz, and the Llama-3 tokenizer in results/tmp/llama3).
source tools/gpu_ab.sh
ab_build
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$R/gpu.txt" 2>&1
B=build/gpu TOK=results/tmp/llama3 OUT=$R timeout 400 bash tools/gpu/load8b.sh >"$R/load8b.log" 2>&1
ab_note "load8b rc=$? $(ab_el) s"
ab_pack
left=$((560 - $(ab_el)))
timeout "$left" build/gpu/sparsed bench kernels --model 8B --tp 1 --out "$R/kern-8b.md" >/dev/null \
    2>"$R/kern-8b.err"
ab_note "kernels 8b rc=$? $(ab_el) s (limit $left s)"
ab_pack
