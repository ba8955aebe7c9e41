"""SparseGPT, Wanda and magnitude pruning in C (`sparsed prune --solve`) against NumPy
references written from the papers' pseudo-code (Frantar & Alistarh 2023, Alg. 1 and the
authors' reference loop; Sun et al. 2024), on random matrices and Hessians, every pattern."""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = [(2, 4), (4, 8), (8, 16), (16, 32), (0, 0)]


def sparsed():
    p = os.environ.get("SPARSED_BIN") or str(ROOT / os.environ.get("SD_BUILD", "build") / "sparsed")
    if not os.path.exists(p):
        pytest.skip(f"{p} not built (set SD_BUILD or SPARSED_BIN)")
    return p


def pname(n, m):
    return f"{n}:{m}" if m else "unstructured"


def lowest(scores, k):
    """Column indices of the k smallest scores of each row (ties: lower column first)."""
    return np.argsort(scores, axis=1, kind="stable")[:, :k]


def sparsegpt_ref(W, H, n, m, damp=0.01, bs=128):
    """SparseGPT as in the reference implementation (sparsegpt.py fasterprune), fp64. Unstructured
    keeps the best half of every row within each block (the bitmask format needs cols/2 per row)."""
    W = W.astype(np.float64).copy()
    H = H.astype(np.float64).copy()
    rows, cols = W.shape
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H += damp * np.mean(np.diag(H)) * np.eye(cols)
    Hinv = np.linalg.cholesky(np.linalg.inv(H)).T  # upper: Hinv^T Hinv = H^-1
    pruned = np.zeros((rows, cols), bool)
    for i1 in range(0, cols, bs):
        i2 = min(i1 + bs, cols)
        cnt = i2 - i1
        W1 = W[:, i1:i2].copy()
        Q1 = np.zeros_like(W1)
        Err1 = np.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        d1 = np.diag(Hinv1)
        mask1 = np.zeros((rows, cnt), bool)
        if m == 0:
            tmp = W1**2 / d1[None, :] ** 2
            np.put_along_axis(mask1, lowest(tmp, cnt // 2), True, axis=1)
        for i in range(cnt):
            w = W1[:, i]
            d = Hinv1[i, i]
            if m and i % m == 0:
                tmp = W1[:, i:i + m] ** 2 / d1[None, i:i + m] ** 2
                grp = np.zeros((rows, m), bool)
                np.put_along_axis(grp, lowest(tmp, m - n), True, axis=1)
                mask1[:, i:i + m] = grp
            q = w.copy()
            q[mask1[:, i]] = 0
            Q1[:, i] = q
            err = (w - q) / d
            W1[:, i:] -= np.outer(err, Hinv1[i, i:])
            Err1[:, i] = err
        W[:, i1:i2] = Q1
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
        pruned[:, i1:i2] = mask1
    return W, ~pruned


def wanda_ref(W, X, n, m):
    """Wanda: |W| * ||X_j||_2; N:M prunes the M-N lowest of each group, else the lowest half per row.
    X=None gives magnitude pruning."""
    W = W.astype(np.float64)
    metric = np.abs(W) * (np.linalg.norm(X.astype(np.float64), axis=0)[None, :] if X is not None else 1)
    rows, cols = W.shape
    pruned = np.zeros((rows, cols), bool)
    if m:
        for g in range(0, cols, m):
            grp = np.zeros((rows, m), bool)
            np.put_along_axis(grp, lowest(metric[:, g:g + m], m - n), True, axis=1)
            pruned[:, g:g + m] = grp
    else:
        np.put_along_axis(pruned, lowest(metric, cols // 2), True, axis=1)
    Q = W.copy()
    Q[pruned] = 0
    return Q, ~pruned


def run_c(tmp, W, H, n, m, solver, damp=0.01, bs=128):
    rows, cols = W.shape
    W.astype("<f4").tofile(tmp / "w.bin")
    H.astype("<f4").tofile(tmp / "h.bin")
    subprocess.run([sparsed(), "prune", "--solve", str(tmp / "w.bin"), "--hessian", str(tmp / "h.bin"),
                    "--rows", str(rows), "--cols", str(cols), "--pattern", pname(n, m), "--solver", solver,
                    "--damping", str(damp), "--block-size", str(bs), "--threads", "2",
                    "--out-weights", str(tmp / "q.bin"), "--out-mask", str(tmp / "m.bin")], check=True)
    Q = np.fromfile(tmp / "q.bin", "<f4").reshape(rows, cols)
    words = np.fromfile(tmp / "m.bin", "<u4").reshape(rows, cols // 32)
    bits = (words[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1
    return Q, bits.reshape(rows, cols).astype(bool)


def check_pattern(keep, n, m):
    rows, cols = keep.shape
    if m:
        per_group = keep.reshape(rows, cols // m, m).sum(axis=2)
        assert (per_group == n).all(), "an N:M group keeps the wrong count"
    else:
        assert (keep.sum(axis=1) == cols // 2).all(), "a row does not keep exactly half"


def problem(seed, rows=48, cols=288, samples=400, dead_col=None):
    """W [rows, cols], calibration X [samples, cols] with correlated, unevenly scaled columns."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((rows, cols)).astype(np.float32)
    mix = rng.standard_normal((cols, cols)) * 0.3 + np.eye(cols)
    X = (rng.standard_normal((samples, cols)) @ mix) * rng.uniform(0.2, 3.0, cols)
    if dead_col is not None:
        X[:, dead_col] = 0
    X = X.astype(np.float32)
    H = (2.0 / samples) * (X.astype(np.float64).T @ X.astype(np.float64))
    return W, X, H.astype(np.float32)


def relerr(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("n,m", PATTERNS)
def test_sparsegpt_matches_numpy(tmp_path, n, m):
    W, X, H = problem(1 + m, dead_col=7)
    Q, keep = run_c(tmp_path, W, H, n, m, "sparsegpt")
    Qr, keepr = sparsegpt_ref(W, H, n, m)
    check_pattern(keep, n, m)
    assert (keep == keepr).mean() > 0.999, "masks differ from the reference"
    assert relerr(Q, Qr) < 1e-4
    assert (Q[:, 7] == 0).all(), "a dead column must be zeroed"


@pytest.mark.parametrize("n,m", PATTERNS)
@pytest.mark.parametrize("solver", ["wanda", "magnitude"])
def test_wanda_magnitude_match_numpy(tmp_path, n, m, solver):
    W, X, H = problem(100 + m)
    Q, keep = run_c(tmp_path, W, H, n, m, solver)
    Qr, keepr = wanda_ref(W, X if solver == "wanda" else None, n, m)
    check_pattern(keep, n, m)
    assert (keep == keepr).all()
    assert relerr(Q, Qr) < 1e-4


@pytest.mark.parametrize("n,m", PATTERNS)
def test_sparsegpt_reconstruction_beats_magnitude(tmp_path, n, m):
    W, X, H = problem(200 + m)
    X64 = X.astype(np.float64)

    def recon(Q):
        return np.linalg.norm((W.astype(np.float64) - Q) @ X64.T)

    err = {s: recon(run_c(tmp_path, W, H, n, m, s)[0].astype(np.float64))
           for s in ("sparsegpt", "wanda", "magnitude")}
    assert err["sparsegpt"] < err["magnitude"], err
    assert err["sparsegpt"] < err["wanda"], err


def test_other_block_size_and_damping(tmp_path):
    W, X, H = problem(7, cols=256)
    Q, keep = run_c(tmp_path, W, H, 2, 4, "sparsegpt", damp=0.1, bs=64)
    Qr, _ = sparsegpt_ref(W, H, 2, 4, damp=0.1, bs=64)
    assert relerr(Q, Qr) < 1e-4


def test_singular_hessian_still_solves(tmp_path):
    """A rank-deficient H (fewer samples than columns) factorises after the damping."""
    W, X, H = problem(9, cols=128, samples=40)
    Q, keep = run_c(tmp_path, W, H, 2, 4, "sparsegpt")
    Qr, _ = sparsegpt_ref(W, H, 2, 4)
    check_pattern(keep, 2, 4)
    assert relerr(Q, Qr) < 1e-4
