# Sourced by the run scripts under results/<date>/ on the GPU machine: the part every one of
# them repeated (device env, output folder, timer, building the new and the old tree side by
# side, one line per step in summary.txt, the tarball the device hands back). A script then says
# only what it measures, e.g.
#
#   source tools/gpu_ab.sh            # repo root of the new tree; OLD=../.snapold (optional)
#   ab_build                          # new (and old) build/gpu/sparsed + test binaries
#   ab_test new build/gpu/tests/kernels/test_spmv_gpu   # or ab_gpu_tests: all of them
#   ab_memcheck build/gpu/tests/kernels/test_spmv_gpu gpu_8_16 gather_corrupt
#   for k in 1 2; do                  # alternate, so drift hits both sides
#       ab_decode old$k "$OLD_BIN" llama-3.1-8b dense,2:4 1,16
#       ab_decode new$k "$NEW_BIN" llama-3.1-8b dense,2:4 1,16
#   done
#   ab_kernels notcx "$NEW_BIN" --quick --no-tcx
#   ab_prof new-1 build/gpu/tools/prof_spmv 4:8,8:16 16,64 "128:1 256:1"
#   ab_pack
#
# Environment switches go in front of a call: SD_NM_TCX=0 ab_decode ... (docs/architecture.md).
# Name the runs VARIANT-K (K: the alternation, as old-1, new-1): tools/ab_summary.py then groups
# each variant's runs from summary.txt and prints their ratios to a base variant.
# AB_DECODE_ARGS="--tune-cache $R/tune.json" makes every decode after the first run the kernels
# the first one tuned (engine/tune_cache.h): an A/B of a change outside the kernel choice then
# compares the same kernels (first-use timing otherwise differs from process to process).
set -uo pipefail
# The run writes into $R (outside $OUT: the device hands back only a few files) and packs it
# into $OUT/r.tgz, the one file to fetch.
OUT=${OUT:-/tmp/out}
R=${AB_WORK:-/tmp/ab}/r
rm -rf "$R" # a machine kept warm between calls still holds the last call's files
mkdir -p "$R" "$OUT"
source tools/device_env.sh
NEW_BIN=build/gpu/sparsed
OLD=${OLD:-}
OLD_BIN=${OLD:+$OLD/build/gpu/sparsed}
AB_START=$(date +%s)

ab_el() {
    echo $(($(date +%s) - AB_START))
}

# One line to summary.txt (and stdout).
ab_note() {
    echo "$*" | tee -a "$R/summary.txt"
}

# Builds the new tree (everything: daemon, tests) and, with OLD set, the old tree's daemon, in
# parallel; logs in build.log / build-old.log. AB_PREBUILT=1: the binaries were built on the CI
# machine (`make BUILD=build/gpu ...`, its nvcc targets sm_90 too) and carried (`carry` names
# each file, 64 MiB in all): no build here, which saves the ~2 minutes of device time it costs.
ab_build() {
    if [ -n "${AB_PREBUILT:-}" ]; then
        ab_note "build skipped (prebuilt): new $(test -x "$NEW_BIN" && echo ok || echo MISSING)" \
            "${OLD:+old $(test -x "$OLD_BIN" && echo ok || echo MISSING)}"
        return
    fi
    make -j16 BUILD=build/gpu all >"$R/build.log" 2>&1 &
    if [ -n "$OLD" ]; then
        (cd "$OLD" && make -j16 BUILD=build/gpu build/gpu/sparsed >"$R/build-old.log" 2>&1) &
    fi
    wait
    ab_note "build $(ab_el) s: new $(test -x "$NEW_BIN" && echo ok || echo FAILED)" \
        "${OLD:+old $(test -x "$OLD_BIN" && echo ok || echo FAILED)}"
}

# ab_test NAME BINARY [TIMEOUT]: runs one test binary, its output in test-NAME.log.
ab_test() {
    timeout "${3:-300}" "$2" >"$R/test-$1.log" 2>&1
    ab_note "test $1 rc=$? $(ab_el) s: $(tail -1 "$R/test-$1.log")"
}

# ab_gpu_tests: every GPU test binary of the tree (built, or carried with AB_PREBUILT), one
# ab_test each: the check a run script makes before it times anything, or on a session's final code.
AB_GPU_TESTS="kernels/test_spmv_gpu kernels/test_sp24_gpu kernels/test_swiglu_gpu engine/test_swiglu_fuse_gpu
    engine/test_cuda_backend engine/test_tune_cache_gpu engine/test_attn_fused_gpu engine/test_cslt
    engine/test_cslt_graph engine/test_expand_gpu kernels/test_nm_gemm_gpu"
ab_gpu_tests() {
    local t
    for t in $AB_GPU_TESTS; do
        ab_test "${t#*/}" "build/gpu/tests/$t" 300
    done
}

# ab_memcheck BINARY TEST...: compute-sanitizer memcheck of one GPU test binary, once per TEST
# (SD_TEST_ONLY: a substring of the test names), each log in memcheck-TEST.log, its verdict noted.
ab_memcheck() {
    local bin=$1 t
    shift
    for t in "$@"; do
        SD_TEST_ONLY=$t timeout 200 compute-sanitizer --tool memcheck "$bin" >"$R/memcheck-$t.log" 2>&1
        ab_note "memcheck $t rc=$? $(tail -1 "$R/memcheck-$t.log")"
    done
}

# ab_decode NAME BINARY PRESET PATTERNS BATCHES [CTX] [TIMEOUT]: sparsed bench decode on a
# config/presets preset; the table in decode-NAME.md, its rows copied into summary.txt.
# AB_DECODE_ARGS (e.g. --deterministic) go to bench decode as well.
ab_decode() {
    # shellcheck disable=SC2086 # AB_DECODE_ARGS is a list of flags
    timeout "${7:-200}" "$2" bench decode --preset "config/presets/$3.json" --pattern "$4" --batch "$5" \
        --ctx "${6:-512}" ${AB_DECODE_ARGS:-} --out "$R/decode-$1.md" >>"$R/decode.log" 2>&1
    ab_note "decode $1 rc=$? $(ab_el) s"
    grep -E '^\| [a-z0-9:]+ ' "$R/decode-$1.md" 2>/dev/null | grep -v pattern | sed "s/^/$1 /" >>"$R/summary.txt"
}

# ab_kernels NAME BINARY [ARGS...]: sparsed bench kernels ARGS; the table in kern-NAME.md.
ab_kernels() {
    local name=$1 bin=$2
    shift 2
    timeout 200 "$bin" bench kernels "$@" --out "$R/kern-$name.md" >/dev/null 2>"$R/kern-$name.err"
    ab_note "kernels $name rc=$? $(ab_el) s"
}

# ab_prof NAME PROF_SPMV PATTERNS BATCHES CONFIGS [SHAPES]: back-to-back timings of explicit
# kernel configs (tools/gpu/prof_spmv, 100 launches each), one line per run in prof.txt, each
# starting with NAME. PATTERNS and BATCHES are comma lists, CONFIGS "RW:SPLIT RW:SPLIT ...",
# SHAPES "ROWSxCOLS ..." (default: the Llama-3.1-8B linears qkv, o, gate_up, down). Name the runs
# VARIANT-K, as for ab_decode, and alternate the variants.
ab_prof() {
    local name=$1 bin=$2 pats=$3 batches=$4 cfgs=$5 shapes=${6:-6144x4096 4096x4096 28672x4096 4096x14336}
    local sh pat b cfg
    for sh in $shapes; do
        for b in ${batches//,/ }; do
            for pat in ${pats//,/ }; do
                for cfg in $cfgs; do
                    echo "$name $sh B=$b $pat rw=${cfg%:*} split=${cfg#*:}: $(timeout 30 "$bin" "$pat" "${sh%x*}" \
                        "${sh#*x}" "$b" "${cfg%:*}" "${cfg#*:}" 100 2>&1 | tail -1)" >>"$R/prof.txt"
                done
            done
        done
    done
    ab_note "prof $name $(ab_el) s"
}

# $R as $OUT/r.tgz (again after later steps: each call replaces it).
ab_pack() {
    tar czf "$OUT/r.tgz" -C "$(dirname "$R")" r
}

# ab_records BINARY: the decode tables of record (the issue's protocol, context 512) quoted in the
# README: Llama-3.1-8B, Qwen3-14B and Qwen3-32B, every pattern, batch 1, 4, 16, 64; Llama-3.3-70B
# 2:4 at batch 1, 4, 16 (it fits one H200 only sparse). About 220 s; packs after each model.
ab_records() {
    local all=dense,2:4,4:8,8:16,16:32
    ab_decode rec-8b "$1" llama-3.1-8b $all 1,4,16,64
    ab_pack
    ab_decode rec-q14 "$1" qwen3-14b $all 1,4,16,64 512 240
    ab_pack
    ab_decode rec-q32 "$1" qwen3-32b $all 1,4,16,64 512 240
    ab_pack
    ab_decode rec-70b "$1" llama-3.3-70b 2:4 1,4,16 512 200
    ab_pack
}
