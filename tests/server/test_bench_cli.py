"""`sparsed bench kernels` and `sparsed bench decode` refuse bad arguments with exit status 2 and
a message that names the option, before they touch a GPU (so this runs on GPU-less machines)."""
import subprocess

import pytest

from conftest import sparsed_bin


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
