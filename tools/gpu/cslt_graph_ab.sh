#!/usr/bin/env bash
# tools/gpu/cslt_graph_ab.sh: cuSPARSELt timed against the tiles at 65-256 rows, and inside the
# decode graphs (SD_CUSPARSELT_GRAPHS=1), and the warp expansion kernel (SD_EXPAND_WARP=1;
# kernels/NOTES.md v32), in one device call of ~9 minutes. Steps, each packed into $OUT/r.tgz as
# it ends:
#   1. every GPU test binary (AB_GPU_TESTS: new, test_cslt_graph, cuSPARSELt captured into a
#      128-row decode graph, and test_expand_gpu, both expansion kernels against the CPU) and
#      test_warmup;
#   1b. `sparsed bench gemm` at 128, 512 and 2048 rows: the two expansion kernels side by side (same
#      bits), and the N:M GEMM of kernels/nm_gemm.h beside dense cuBLAS and the other paths;
#   2. `sparsed bench decode` at Llama-3.1-8B shapes, batch 64 / 128 / 256: dense and 2:4 with the
#      defaults (cuSPARSELt timed, out of the graphs: the decode graphs run the tiles), 2:4 with
#      SD_CUSPARSELT_GRAPHS=1 (timed, in the graphs), with SD_CUSPARSELT_TIMED=0 too (cuSPARSELt
#      wherever it can) and with SD_CUSPARSELT=0 (the tiles only);
#   3. `sparsed bench prefill`, chunks of 128-512 tokens: dense, 2:4 with the defaults and with
#      SD_CUSPARSELT_TIMED=0 (v31's rule: cuSPARSELt above 64 rows, untimed), 8:16 with and without
#      SD_EXPAND_WARP=1;
#   4. the steady load at 128 req/s with up to 128 sequences a step: dense, 2:4, and 2:4 with
#      SD_CUSPARSELT_GRAPHS=1;
#   5. in the time left, the batch-1 records (every pattern's decode, the 8B kernel table).
# Run from the repo root with the binaries prebuilt here (tools/gpu/prebuild.sh with the list of
# AB_GPU_TESTS plus test_warmup) and the tokenizer packed:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/cslt_graph_ab.sh
# carry: .debs, results/tmp.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # steady_load, steady_table
P8=config/presets/llama-3.1-8b.json
tar xJf results/tmp/llama3.tar.xz -C results/tmp
# the prebuilt binaries name this machine's path to the library: the device's is PyTorch's
SD_CUSPARSELT_LIB=$(python3 -c 'import nvidia.cusparselt as m; print(list(m.__path__)[0])' 2>/dev/null)/lib/libcusparseLt.so.0
export SD_CUSPARSELT_LIB
ab_build
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$R/gpu.txt" 2>&1

for t in $AB_GPU_TESTS engine/test_warmup; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 300
done
ab_pack

timeout 120 build/gpu/sparsed bench gemm --preset $P8 --rows 128,512,2048 --reps 10 --out "$R/gemm.md" \
    >/dev/null 2>"$R/gemm.err"
ab_note "bench gemm rc=$? $(ab_el) s"
grep -E '^\| (qkv|o|gate_up|down) ' "$R/gemm.md" >>"$R/summary.txt"
ab_pack

# bench_decode NAME ENV... -- ARGS: one `sparsed bench decode` with ENV set, its table in summary.txt
bench_decode() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" SD_TUNE_LOG=1 timeout 150 build/gpu/sparsed bench decode --preset $P8 "$@" \
        --out "$R/decode-$name.md" >/dev/null 2>"$R/decode-$name.err"
    ab_note "bench decode $name rc=$? $(ab_el) s"
    grep -E '^\| (dense|2:4)' "$R/decode-$name.md" | sed "s/^/$name /" >>"$R/summary.txt"
}
bench_decode default -- --pattern dense,2:4 --batch 64,128,256
bench_decode graphs SD_CUSPARSELT_GRAPHS=1 -- --pattern 2:4 --batch 128,256
bench_decode graphs-untimed SD_CUSPARSELT_GRAPHS=1 SD_CUSPARSELT_TIMED=0 -- --pattern 2:4 --batch 128,256
bench_decode tiles SD_CUSPARSELT=0 -- --pattern 2:4 --batch 128,256
ab_pack

bench_prefill() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" SD_TUNE_LOG=1 timeout 150 build/gpu/sparsed bench prefill --preset $P8 "$@" \
        --chunk "${CH:-128,192,256,512}" --out "$R/prefill-$name.md" >/dev/null 2>"$R/prefill-$name.err"
    ab_note "bench prefill $name rc=$? $(ab_el) s"
    grep -E '^\| (dense|[0-9]+:[0-9]+)' "$R/prefill-$name.md" | sed "s/^/$name /" >>"$R/summary.txt"
}
bench_prefill default -- --pattern dense,2:4
bench_prefill untimed SD_CUSPARSELT_TIMED=0 -- --pattern 2:4
CH=128,512,2048 bench_prefill 8of16 -- --pattern 8:16
CH=128,512,2048 bench_prefill 8of16-warp SD_EXPAND_WARP=1 -- --pattern 8:16
ab_pack

B=build/gpu RATES=128 N=256 PORT=18284 OUTLEN=128 SERVE_EXTRA="--max-seqs 128"
steady() { # NAME CKPT: steady_load with its table in summary.txt (the caller's env reaches the daemon)
    local name=$1 ck=$2
    steady_load "$R/steady-$name" "$ck" 150 --timeout 120
    ab_note "steady $name rc=$? $(ab_el) s: $(grep -o 'ready at .* after [0-9]* s' "$R/steady-$name.log")"
    steady_table "$R/steady-$name" >>"$R/summary.txt"
    ab_pack
}
for p in dense 2:4; do
    name=${p/:/of}
    python3 tools/synth_ckpt.py --config $P8 --tokenizer results/tmp/llama3 --out /tmp/ck-$name \
        $([ $p = dense ] || echo --pattern $p) >"$R/synth-$name.log" 2>&1
    ab_note "synth $p rc=$? $(ab_el) s"
    steady "$name" /tmp/ck-$name
    [ $p = dense ] || SD_CUSPARSELT_GRAPHS=1 steady "$name-graphs" /tmp/ck-$name
    rm -rf /tmp/ck-$name
done

# 5. the batch-1 records on this machine, in what time the call has left (a 600 s device call):
#    issue #4's decode protocol for every pattern, then issue #3's kernel table at batch 1 and 8.
left_s() { echo $((${AB_LIMIT_S:-570} - $(ab_el))); }
if [ "$(left_s)" -gt 60 ]; then
    timeout $(($(left_s) < 120 ? $(left_s) : 120)) build/gpu/sparsed bench decode --preset $P8 \
        --pattern dense,2:4,4:8,8:16,16:32 --batch 1 --out "$R/decode-b1.md" >/dev/null 2>"$R/decode-b1.err"
    ab_note "bench decode b1 rc=$? $(ab_el) s"
    grep -E '^\| (dense|[0-9]+:[0-9]+) ' "$R/decode-b1.md" >>"$R/summary.txt"
    ab_pack
fi
if [ "$(left_s)" -gt 60 ]; then
    timeout "$(left_s)" build/gpu/sparsed bench kernels --model 8B --tp 1 --batch 1,8 --reps 20 \
        --out "$R/kern-8b.md" >/dev/null 2>"$R/kern-8b.err"
    ab_note "bench kernels rc=$? $(ab_el) s"
    ab_pack
fi
