#!/usr/bin/env bash
# Runs every test: the C test binaries under $1 (default build), then the Python suites
# (pytest, against $1/sparsed) unless SD_TEST_ONLY_C=1. Prints per-binary results and a total.
#
# SD_SANITIZED=1 (make test-san): $1 is an ASan + UBSan build (make test-asan).
# SD_SANITIZED=tsan (make test-tsan): $1 is a ThreadSanitizer build (make tsan).
# Either way every report — from a C test, from the daemons the Python tests start (they stop
# them with SIGTERM so that they tear down and LeakSanitizer checks them at exit:
# SD_STOP_GRACE), from any `sparsed` subcommand — goes to $1/sanitizer-logs/ and fails the run.
# SD_TIMEOUT_SCALE (default 3 here) stretches the waits of timing-sensitive tests.
# SD_SAN_PYTEST_ARGS overrides which Python tests run; SD_TEST_BINS (paths under $1/tests,
# e.g. "engine/test_sched server/test_api") which C tests run — a missing one fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
san=${SD_SANITIZED:-0}
[[ $san == tsan || $san == 0 ]] || san=1
pass=0 fail=0 skip=0 failed_bins=()
if [[ $san != 0 ]]; then
    logs=$PWD/$build/sanitizer-logs
    rm -rf "$logs" && mkdir -p "$logs"
    export SD_STOP_GRACE=${SD_STOP_GRACE:-30} SD_TIMEOUT_SCALE=${SD_TIMEOUT_SCALE:-3}
fi
if [[ $san == 1 ]]; then
    # halt_on_error: the first report ends the process (nothing is recovered from);
    # detect_leaks: LeakSanitizer at exit; suppressions only for third-party leaks (see the file).
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:log_path=$logs/asan"
    export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
elif [[ $san == tsan ]]; then
    # halt_on_error + exitcode: the first race (or lock-order inversion, thread leak, unsafe
    # call in a signal handler...) ends the process with status 66 and leaves a report file;
    # history_size: enough access history to print both stacks of a race;
    # suppressions only for races inside third-party libraries (see the file).
    export TSAN_OPTIONS="halt_on_error=1:exitcode=66:history_size=4:second_deadlock_stack=1:suppressions=$PWD/tools/tsan.supp:print_suppressions=0:log_path=$logs/tsan"
fi
if [[ -n ${SD_TEST_BINS:-} ]]; then
    bins=()
    for b in $SD_TEST_BINS; do
        if [[ -x $build/tests/$b ]]; then bins+=("$build/tests/$b"); else
            echo "$build/tests/$b: listed in SD_TEST_BINS but not built"; fail=$((fail + 1)); failed_bins+=("$build/tests/$b")
        fi
    done
else
    mapfile -t bins < <(find "$build/tests" -type f -perm -u+x -name 'test_*' | sort)
fi
for t in "${bins[@]}"; do
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
echo "C tests ($build): $pass passed, $fail failed, $skip skipped"
rc=0
if ((${#failed_bins[@]})); then
    for t in "${failed_bins[@]}"; do [[ -f $t.log ]] && echo "--- $t.log" && tail -40 "$t.log"; done
    rc=1
fi
if [[ ${SD_TEST_ONLY_C:-0} != 1 ]]; then
    if [[ $san != 0 && ! -x $build/sparsed ]]; then
        echo "$build/sparsed missing: the sanitized Python pass cannot run (make test-asan / make tsan)"
        rc=1
    elif [[ $san != 0 ]]; then
        # The fuzz targets are sanitized builds of their own (build-fuzz), run by the plain pass.
        # shellcheck disable=SC2086
        SD_BUILD=$build ${PYTHON:-python3} -m pytest -q -ra ${SD_SAN_PYTEST_ARGS:---ignore=tests/fuzz tests} || rc=1
    else
        SD_BUILD=$build ${PYTHON:-python3} -m pytest -q -ra tests || rc=1
    fi
fi
if [[ $san != 0 ]]; then
    reports=$(find "$logs" -type f | sort)
    if [[ -n $reports ]]; then
        echo "sanitizer reports ($(echo "$reports" | wc -l)):"
        for f in $reports; do echo "--- $f"; head -60 "$f"; done
        rc=1
    else
        echo "sanitizers: no report"
    fi
fi
exit $rc
