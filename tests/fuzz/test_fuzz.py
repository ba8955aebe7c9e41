"""Bounded libFuzzer runs in CI: `make fuzz` builds every fuzz/fuzz_<name>.c (clang, ASan +
UBSan, library objects in build-fuzz/), then each target runs on its seed corpus
fuzz/corpus/<name>/ (regression inputs included) for $SD_FUZZ_SECONDS (default 20) seconds.
A crash, leak, UB report or timeout fails the test and names the reproducer. Skips when
clang or its libFuzzer runtime is missing."""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ_BUILD = ROOT / os.environ.get("SD_FUZZ_BUILD", "build-fuzz")
TARGETS = sorted(p.stem[len("fuzz_"):] for p in (ROOT / "fuzz").glob("fuzz_*.c"))
SECONDS = int(os.environ.get("SD_FUZZ_SECONDS", "20"))


def libfuzzer_missing(tmp):
    """None if clang links a libFuzzer target with ASan + UBSan, else the reason."""
    clang = os.environ.get("FUZZ_CC", "clang")
    if not shutil.which(clang):
        return f"{clang} not found (libFuzzer targets need clang)"
    src = tmp / "probe.c"
    src.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                   "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n")
    r = subprocess.run([clang, "-fsanitize=fuzzer,address,undefined", str(src), "-o", str(tmp / "probe")],
                       capture_output=True, text=True)
    if r.returncode:
        return f"{clang} lacks libFuzzer: {r.stderr.strip()[:300]}"
    return None


@pytest.fixture(scope="module")
def fuzz_bins(tmp_path_factory):
    why = libfuzzer_missing(tmp_path_factory.mktemp("probe"))
    if why:
        pytest.skip(why)
    r = subprocess.run(["make", "-s", "fuzz", f"FUZZ_BUILD={FUZZ_BUILD}"], cwd=ROOT, capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, f"make fuzz failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return FUZZ_BUILD / "fuzz"


def test_every_target_has_seeds():
    assert TARGETS, "no fuzz/fuzz_*.c targets"
    for t in TARGETS:
        seeds = list((ROOT / "fuzz" / "corpus" / t).glob("*"))
        assert seeds, f"fuzz/corpus/{t}/ has no seed inputs"


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target(fuzz_bins, target, tmp_path):
    binary = fuzz_bins / f"fuzz_{target}"
    assert binary.exists(), f"{binary} was not built"
    work = tmp_path / "corpus"  # new units land here, not in the committed seeds
    work.mkdir()
    cmd = [str(binary), f"-max_total_time={SECONDS}", "-timeout=10", "-rss_limit_mb=2048", "-max_len=65536",
           "-print_final_stats=1", f"-artifact_prefix={tmp_path}/", str(work), str(ROOT / "fuzz" / "corpus" / target)]
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=SECONDS + 240, env=env)
    artifacts = [p for p in tmp_path.iterdir() if p.is_file()]
    msg = "\n".join(f"reproducer {p}: {p.read_bytes()[:400]!r}" for p in artifacts)
    assert r.returncode == 0 and not artifacts, f"fuzz_{target} failed (rc={r.returncode}):\n{msg}\n" \
                                                f"{r.stderr[-6000:]}"
    assert "Done" in r.stderr or "DONE" in r.stderr, r.stderr[-2000:]
