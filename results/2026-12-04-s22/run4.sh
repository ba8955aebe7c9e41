#!/usr/bin/env bash
# results/2026-12-04-s22/run4.sh: what prefill costs a bitmask checkpoint. `sparsed generate` of
# a 2048-word prompt (~2048 tokens, prefilled in chunks of 512: steps of more than 64 rows, which
# run cuBLAS, on weights expanded from the bitmask for 2:4) on random Llama-3.1-8B dense and 2:4
# checkpoints, three processes each; its stderr line gives the prefill time.
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash results/2026-12-04-s22/run4.sh
source tools/gpu_ab.sh
tar xJf results/tmp/llama3.tar.xz -C results/tmp
ab_build
P=$(python3 -c "print('x ' * 2048)")
for v in dense 2:4; do
    n=${v/:/of}
    flags=()
    [ "$v" != dense ] && flags=(--pattern "$v")
    python3 tools/synth_ckpt.py --config config/presets/llama-3.1-8b.json --tokenizer results/tmp/llama3 \
        --out "/tmp/ck-$n" "${flags[@]}" >"$R/synth-$n.log" 2>&1
    for k in 1 2 3; do
        timeout 60 build/gpu/sparsed generate --model "/tmp/ck-$n" --backend cuda --prompt "$P" \
            --max-tokens 2 --ignore-eos >/dev/null 2>>"$R/gen-$n.log"
    done
    ab_note "$v $(ab_el) s: $(grep -o 'prompt tokens.*' "$R/gen-$n.log" | tr '\n' ' ')"
    rm -rf "/tmp/ck-$n"
    ab_pack
done
