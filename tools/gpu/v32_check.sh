#!/usr/bin/env bash
# tools/gpu/v32_check.sh: the twenty-sixth session's code, written without a GPU (kernels/NOTES.md
# v32), checked and timed in one device call of at most ~9.5 minutes. Steps, each packed into
# $OUT/r.tgz as it ends, the later ones only where the call has time left:
#   1. every GPU test binary (AB_GPU_TESTS, new: test_cslt_graph, cuSPARSELt captured into a 128-row
#      decode graph; test_expand_gpu, both expansion kernels against the CPU; test_nm_gemm_gpu, the
#      N:M GEMM against the CPU twin), test_warmup and test_cuda_sample (logit_bias in the GPU
#      sampler, written in the twenty-seventh session);
#   2. `sparsed bench gemm` at 128, 512 and 2048 rows: the two expansion kernels side by side (same
#      bits), the N:M GEMM of kernels/nm_gemm.h beside dense cuBLAS and the other paths;
#   3. `sparsed bench decode` at Llama-3.1-8B shapes: dense and 2:4 at batch 64 / 128 / 256 with the
#      defaults (cuSPARSELt timed, out of the graphs: the decode graphs run the tiles), 2:4 with
#      SD_CUSPARSELT_GRAPHS=1 (timed, in the graphs) and SD_CUSPARSELT=0 (the tiles only); 8:16 at
#      batch 128 by default, with SD_NM_GEMM=1 (untimed) and =2 (timed);
#   4. `sparsed bench prefill`: dense and 2:4 (defaults, and SD_CUSPARSELT_TIMED=0: v31's untimed
#      rule) at 128-512 tokens; 8:16 at 128 / 512 / 2048 by default, with SD_EXPAND_WARP=1 and with
#      SD_NM_GEMM=1, and at 128-256 with SD_NM_GEMM=2;
#   5. the steady load at 128 req/s, up to 128 sequences a step: dense, 2:4, 2:4 with
#      SD_CUSPARSELT_GRAPHS=1;
#   6. the batch-1 records (every pattern's decode; the 8B kernel table at batch 1 and 8).
# Run from the repo root with the binaries prebuilt here and the tokenizer packed (results/tmp):
#   tools/gpu/prebuild.sh build/gpu/sparsed $(for t in kernels/test_spmv_gpu kernels/test_sp24_gpu \
#       kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu engine/test_cuda_backend \
#       engine/test_tune_cache_gpu engine/test_attn_fused_gpu engine/test_cslt engine/test_cslt_graph \
#       engine/test_expand_gpu kernels/test_nm_gemm_gpu engine/test_warmup engine/test_cuda_sample; do
#       echo build/gpu/tests/$t; done)
# (AB_GPU_TESTS of tools/gpu_ab.sh, test_warmup and test_cuda_sample), then on the device:
#   tar xJf results/tmp/bins.tar.xz && AB_PREBUILT=1 bash tools/gpu/v32_check.sh
# carry: .debs, results/tmp.
source tools/gpu_ab.sh
source tools/gpu/lib.sh # prebuilt_start, steady_load, steady_table
P8=config/presets/llama-3.1-8b.json
prebuilt_start
left_s() { ab_time_left; }
have() { ab_have "$@"; }

for t in $AB_GPU_TESTS engine/test_warmup engine/test_cuda_sample; do
    ab_test "${t#*/}" "build/gpu/tests/$t" 300
done
ab_pack

timeout 120 build/gpu/sparsed bench gemm --preset $P8 --rows 128,512,2048 --reps 10 --out "$R/gemm.md" \
    >/dev/null 2>"$R/gemm.err"
ab_note "bench gemm rc=$? $(ab_el) s"
grep -E '^\| (qkv|o|gate_up|down) ' "$R/gemm.md" >>"$R/summary.txt"
ab_pack

bench() { ab_bench "$@"; }
bench default decode -- --pattern dense,2:4 --batch 64,128,256
bench graphs decode SD_CUSPARSELT_GRAPHS=1 -- --pattern 2:4 --batch 128,256
bench tiles decode SD_CUSPARSELT=0 -- --pattern 2:4 --batch 128,256
bench 8of16 decode -- --pattern 8:16 --batch 128
bench 8of16-nmgemm decode SD_NM_GEMM=1 -- --pattern 8:16 --batch 128
bench 8of16-nmgemm-timed decode SD_NM_GEMM=2 -- --pattern 8:16 --batch 128
bench default prefill -- --pattern dense,2:4 --chunk 128,192,256,512
bench untimed prefill SD_CUSPARSELT_TIMED=0 -- --pattern 2:4 --chunk 128,192,256,512
bench 8of16 prefill -- --pattern 8:16 --chunk 128,512,2048
bench 8of16-warp prefill SD_EXPAND_WARP=1 -- --pattern 8:16 --chunk 128,512,2048
bench 8of16-nmgemm prefill SD_NM_GEMM=1 -- --pattern 8:16 --chunk 128,512,2048
bench 8of16-nmgemm-timed prefill SD_NM_GEMM=2 -- --pattern 8:16 --chunk 128,192,256

B=build/gpu RATES=128 N=256 PORT=18284 OUTLEN=128 SERVE_EXTRA="--max-seqs 128"
steady() { # NAME CKPT: steady_load with its table in summary.txt (the caller's env reaches the daemon)
    local name=$1 ck=$2
    have 60 "steady $name" || return 0
    steady_load "$R/steady-$name" "$ck" 150 --timeout 120
    ab_note "steady $name rc=$? $(ab_el) s: $(grep -o 'ready at .* after [0-9]* s' "$R/steady-$name.log")"
    steady_table "$R/steady-$name" >>"$R/summary.txt"
    ab_pack
}
for p in dense 2:4; do
    # a synthetic 8B checkpoint takes ~60 s to write, each steady run ~40 s
    have $([ $p = dense ] && echo 150 || echo 200) "steady $p" || break
    name=${p/:/of}
    python3 tools/synth_ckpt.py --config $P8 --tokenizer results/tmp/llama3 --out /tmp/ck-$name \
        $([ $p = dense ] || echo --pattern $p) >"$R/synth-$name.log" 2>&1
    ab_note "synth $p rc=$? $(ab_el) s"
    steady "$name" /tmp/ck-$name
    [ $p = dense ] || SD_CUSPARSELT_GRAPHS=1 steady "$name-graphs" /tmp/ck-$name
    rm -rf /tmp/ck-$name
done

b1_records
