#!/usr/bin/env bash
# Runs every test: the C test binaries under $1 (default build), then the Python suites
# (pytest) unless SD_TEST_ONLY_C=1. Prints per-binary results and a total line.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
pass=0 fail=0 skip=0 failed_bins=()
for t in $(find "$build/tests" -type f -perm -u+x -name 'test_*' | sort) \
         $(find build-asan/tests -type f -perm -u+x -name 'test_*' 2>/dev/null | grep -E "${SD_ASAN_TESTS:-test_corrupt|test_safetensors|test_model_config|test_checkpoint|test_tokenizer}" | sort); do
    out=$(timeout 1200 "$t" 2>"$t.log"); rc=$?
    line=$(echo "$out" | tail -n 1)
    if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
        pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2])); skip=$((skip + BASH_REMATCH[3]))
    else
        fail=$((fail + 1)); line="crashed or no result line (rc=$rc)"
    fi
    ((rc != 0)) && failed_bins+=("$t")
    printf '%-50s %s\n' "$t" "$line"
    grep -E "^  (FAIL|SKIP)" "$t.log" | head -20
done
echo "C tests: $pass passed, $fail failed, $skip skipped"
if ((${#failed_bins[@]})); then
    for t in "${failed_bins[@]}"; do echo "--- $t.log"; tail -40 "$t.log"; done
    exit 1
fi
[[ ${SD_TEST_ONLY_C:-0} = 1 ]] && exit 0
${PYTHON:-python3} -m pytest -q -ra tests
