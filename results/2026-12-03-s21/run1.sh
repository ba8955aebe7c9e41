#!/usr/bin/env bash
# results/2026-12-03-s21/run1.sh: where the sparse rows' host gap goes (kernels/NOTES.md v26 item
# 6). bench decode now prints per row the host's time in cudaGraphLaunch, each graph's GPU time
# on its own (events around the launch) and the graph back to back. Then SD_GRAPH_PARTS=4 (the
# step in four graphs launched in turn, so the GPU starts after the first part's launch) against
# one graph, on the same kernels (a tuning cache per model). SD_TUNE_LOG=1 prints the graphs'
# node types.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s21/run1.sh
source tools/gpu_ab.sh
ab_build
ab_test cuda_backend build/gpu/tests/engine/test_cuda_backend
SD_GRAPH_PARTS=3 ab_test cuda_backend-p3 build/gpu/tests/engine/test_cuda_backend
ab_test tune_cache build/gpu/tests/engine/test_tune_cache_gpu
ab_pack
export SD_TUNE_LOG=1
all=dense,2:4,4:8,8:16,16:32
AB_DECODE_ARGS="--tune-cache $R/tune-8b.json"
for k in 1 2; do
    SD_GRAPH_PARTS=1 ab_decode p1-$k build/gpu/sparsed llama-3.1-8b $all 1,64
    SD_GRAPH_PARTS=4 ab_decode p4-$k build/gpu/sparsed llama-3.1-8b $all 1,64
done
SD_PDL=0 ab_decode nopdl-1 build/gpu/sparsed llama-3.1-8b dense,4:8 1
ab_pack
AB_DECODE_ARGS="--tune-cache $R/tune-q32.json"
for k in 1 2; do
    SD_GRAPH_PARTS=1 ab_decode q32p1-$k build/gpu/sparsed qwen3-32b dense,2:4,8:16 1 512 240
    SD_GRAPH_PARTS=4 ab_decode q32p4-$k build/gpu/sparsed qwen3-32b dense,2:4,8:16 1 512 240
    ab_pack
done
grep -E "B=[0-9]+ .*ms/step|^graph:" "$R/decode.log" >"$R/host.txt"
ab_note "done $(ab_el) s"
ab_pack
