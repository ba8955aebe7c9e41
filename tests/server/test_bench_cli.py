"""`sparsed bench kernels`, `decode`, `prefill` and `gemm` refuse bad arguments with exit status 2
and a message that names the option, before they touch a GPU (so this runs on GPU-less machines)."""
import subprocess

import pytest

from conftest import ROOT, sparsed_bin


def run(*args):
    return subprocess.run([sparsed_bin(), "bench", *args], capture_output=True, text=True, timeout=60)


def kernels(*args):
    r = run("kernels", *args)
    if "no CUDA support" in r.stderr:
        pytest.skip("this build has no CUDA support: bench kernels takes no options there")
    return r


@pytest.mark.parametrize("batch", ["0", "17", "1,x", "1,,2", ",", "1,2,3,4,5,6,7,8,9", "2,"])
def test_kernels_bad_batch_list(batch):
    r = kernels("--batch", batch)
    assert r.returncode == 2, r
    assert "--batch takes 1 to 8 batch sizes of 1..16" in r.stderr


@pytest.mark.parametrize("args", [["--reps", "0"], ["--reps", "100000"]])
def test_kernels_bad_reps(args):
    r = kernels(*args)
    assert r.returncode == 2, r
    assert "--reps must be" in r.stderr


def test_kernels_bad_shape_filter():
    r = kernels("--tp", "3")
    assert r.returncode == 2 and "--tp must be 1, 2 or 4" in r.stderr, r
    r = kernels("--model", "gpt-2")
    assert r.returncode == 2 and "no shape of gpt-2" in r.stderr, r
    r = kernels("--quick", "--model", "70B")  # --quick measures the 8B alone
    assert r.returncode == 2 and "--quick measures Llama-3.1-8B only" in r.stderr, r


@pytest.mark.parametrize("args", [["--bogus"], ["--batch"], ["--out"], ["--model"], ["--tp"]])
def test_kernels_unknown_or_incomplete_option(args):
    r = kernels(*args)
    assert r.returncode == 2, r
    assert "usage: sparsed bench kernels" in r.stderr and "--batch B1,B2" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        [],  # no preset
        ["--preset", "config/presets/llama-3.1-8b.json", "--batch", "0"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--pattern", "3:4"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--steps", "0"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--bogus", "1"],
    ],
)
def test_decode_bad_arguments(args):
    r = run("decode", *args)
    assert r.returncode == 2, r
    assert "usage: sparsed bench decode" in r.stderr


def test_decode_flags_take_no_value():
    preset = str(ROOT / "config/presets/llama-3.1-8b.json")
    r = run("decode", "--copy-logits", "--preset", preset, "--deterministic", "--batch", "1", "--pattern", "dense")
    if "no CUDA backend" in r.stderr or "no CUDA device" in r.stderr:  # parsed, then refused
        assert r.returncode in (1, 2) and "usage:" not in r.stderr, r
    else:
        pytest.skip("a GPU is present: the run itself is the GPU scripts'")


@pytest.mark.parametrize(
    "args",
    [
        [],  # no preset
        ["--preset", "config/presets/llama-3.1-8b.json", "--chunk", "0"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--chunk", "128,x"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--chunk", "70000"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--pattern", "3:4"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--reps", "0"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--warmup", "0"],  # the first chunk tunes
        ["--preset", "config/presets/llama-3.1-8b.json", "--chunk"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--bogus", "1"],
    ],
)
def test_prefill_bad_arguments(args):
    r = run("prefill", *args)
    assert r.returncode == 2, r
    assert "usage: sparsed bench prefill" in r.stderr and "--chunk 64,128,256,512,2048" in r.stderr


def test_prefill_help_and_no_gpu():
    r = run("prefill", "--help")
    assert r.returncode == 0 and "usage: sparsed bench prefill" in r.stdout, r
    preset = str(ROOT / "config/presets/llama-3.1-8b.json")
    r = run("prefill", "--preset", preset, "--chunk", "128", "--pattern", "dense")
    if "no CUDA backend" in r.stderr:  # a build without nvcc: the mode exists, the backend not
        assert r.returncode == 2, r
    elif "no CUDA device" in r.stderr:  # this machine has no GPU: refused after the arguments
        assert r.returncode == 1, r
    else:
        pytest.skip("a GPU is present: the run itself is tools/gpu/tiles_ab.sh's")
    r = run("prefill", "--preset", "/nonexistent/config.json")
    assert r.returncode in (1, 2) and ("nonexistent" in r.stderr or "no CUDA backend" in r.stderr), r


@pytest.mark.parametrize(
    "args",
    [
        [],  # no preset
        ["--preset", "config/presets/llama-3.1-8b.json", "--rows", "0"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--rows", "128,x"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--rows", "70000"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--reps", "0"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--reps", "5x"],  # a whole number only
        ["--preset", "config/presets/llama-3.1-8b.json", "--device", "-1"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--rows"],
        ["--preset", "config/presets/llama-3.1-8b.json", "--pattern", "2:4"],  # no such option here
    ],
)
def test_gemm_bad_arguments(args):
    r = run("gemm", *args)
    assert r.returncode == 2, r
    assert "usage: sparsed bench gemm" in r.stderr and "--rows 128,256,512,1024,2048" in r.stderr


def test_gemm_help_and_no_gpu():
    r = run("gemm", "--help")
    assert r.returncode == 0 and "usage: sparsed bench gemm" in r.stdout, r
    r = run("--help")
    assert "gemm" in r.stderr, r  # listed among the modes
    preset = str(ROOT / "config/presets/llama-3.1-8b.json")
    r = run("gemm", "--preset", preset, "--rows", "128", "--reps", "2")
    if "no CUDA backend" in r.stderr:
        assert r.returncode == 2, r
    elif "no CUDA device" in r.stderr:
        assert r.returncode == 1, r
    else:
        pytest.skip("a GPU is present: the run itself is tools/gpu/tiles_ab.sh's")
