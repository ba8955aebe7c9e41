"""`sparsed prune --device`: the flag's parsing; without a GPU, a clear error and no output; with
one, the CUDA SparseGPT solver (`--solve --device cuda`) against the NumPy reference of
test_solvers.py and the CPU solver, every pattern."""
import importlib.util
import subprocess
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
_spec = importlib.util.spec_from_file_location("prune_solver_refs", HERE / "test_solvers.py")
refs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refs)


def run_solve(tmp, W, H, n, m, device):
    rows, cols = W.shape
    W.astype("<f4").tofile(tmp / "w.bin")
    H.astype("<f4").tofile(tmp / "h.bin")
    return subprocess.run([refs.sparsed(), "prune", "--solve", str(tmp / "w.bin"), "--hessian", str(tmp / "h.bin"),
                           "--rows", str(rows), "--cols", str(cols), "--pattern", refs.pname(n, m),
                           "--solver", "sparsegpt", "--threads", "2", "--device", device,
                           "--out-weights", str(tmp / f"q_{device}.bin"), "--out-mask", str(tmp / f"m_{device}.bin")],
                          capture_output=True, text=True)


def read_out(tmp, device, rows, cols):
    Q = np.fromfile(tmp / f"q_{device}.bin", "<f4").reshape(rows, cols)
    words = np.fromfile(tmp / f"m_{device}.bin", "<u4").reshape(rows, cols // 32)
    return Q, words


def has_gpu(tmp):
    W, _, H = refs.problem(0, rows=8, cols=64)
    r = run_solve(tmp, W, H, 2, 4, "cuda")
    if r.returncode != 0:
        assert "CUDA" in r.stderr, r.stderr
    return r.returncode == 0


@pytest.mark.parametrize("bad", ["gpu", "cuda:", "cuda:x", "cuda0", ""])
def test_bad_device_refused(tmp_path, bad):
    out = tmp_path / "out"
    r = subprocess.run([refs.sparsed(), "prune", "--model", str(ROOT / "models/tiny"), "--out", str(out),
                        "--solver", "magnitude", "--device", bad], capture_output=True, text=True)
    assert r.returncode == 2 and "--device" in r.stderr, r.stderr
    assert not out.exists()


def test_cuda_without_gpu_is_a_clear_error(tmp_path):
    if has_gpu(tmp_path):
        pytest.skip("a GPU is present")
    out = tmp_path / "out"
    r = subprocess.run([refs.sparsed(), "prune", "--model", str(ROOT / "models/tiny"), "--out", str(out),
                        "--solver", "magnitude", "--device", "cuda", "--quiet"], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "--device cuda" in r.stderr and "CUDA" in r.stderr, r.stderr
    assert not out.exists() and not list(tmp_path.glob("out.tmp-*"))


@pytest.mark.parametrize("n,m", refs.PATTERNS)
def test_cuda_solver_matches_numpy_and_cpu(tmp_path, n, m):
    if not has_gpu(tmp_path):
        pytest.skip("no CUDA device")
    W, _, H = refs.problem(300 + m, dead_col=7)
    rows, cols = W.shape
    for dev in ("cuda", "cpu"):
        r = run_solve(tmp_path, W, H, n, m, dev)
        assert r.returncode == 0, r.stderr
    Qg, kg = read_out(tmp_path, "cuda", rows, cols)
    Qc, kc = read_out(tmp_path, "cpu", rows, cols)
    assert (kg == kc).all(), "GPU and CPU masks differ"
    assert np.abs(Qg - Qc).max() <= 1e-3 * np.abs(Qc).max()
    Qr, keepr = refs.sparsegpt_ref(W, H, n, m)
    keep = ((kg[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1).reshape(rows, cols).astype(bool)
    refs.check_pattern(keep, n, m)
    assert (keep == keepr).mean() > 0.999
    assert refs.relerr(Qg, Qr) < 1e-4
    assert (Qg[:, 7] == 0).all()
