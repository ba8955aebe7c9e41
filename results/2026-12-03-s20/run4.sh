#!/usr/bin/env bash
# results/2026-12-03-s20/run4.sh: the refine pass's order effect (kernels/NOTES.md v19: with
# SD_TUNE_REFINE=1 the patterns run last in a bench process decoded slower). Is it the refine pass
# or the process? One bench process runs dense, 2:4, 8:16, 16:32, then dense and 2:4 again, batch
# 1, plain against refine, alternated twice (a later dense / 2:4 slower than its first run in the
# plain process too would put it on the process); then one pattern a process (dense, 2:4, 8:16),
# plain against refine, alternated twice. The tree is fd75e80's daemon (results/tmp/old_sparsed).
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-03-s20/run4.sh
source tools/gpu_ab.sh
ab_build
export SD_TUNE_LOG=1
B=results/tmp/old_sparsed
for k in 1 2; do
    ab_decode plain-$k $B llama-3.1-8b dense,2:4,8:16,16:32,dense,2:4 1
    SD_TUNE_REFINE=1 ab_decode refine-$k $B llama-3.1-8b dense,2:4,8:16,16:32,dense,2:4 1
    ab_pack
done
for k in 1 2; do
    for p in dense 2:4 8:16; do
        ab_decode one-plain-$k-${p/:/-} $B llama-3.1-8b $p 1
        SD_TUNE_REFINE=1 ab_decode one-refine-$k-${p/:/-} $B llama-3.1-8b $p 1
    done
    ab_pack
done
ab_note "done $(ab_el) s"
ab_pack
