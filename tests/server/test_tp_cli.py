"""`sparsed serve` in the multi-process tensor-parallel mode, the parts that need no GPU: the
tp_rank / tp_addr / tp_timeout keys (flags and config file, clear errors naming the key), and
the bootstrap between real processes — a rank alone gives up at tp_timeout naming what is
missing, and ranks started with different step options are refused by rank 0. On a build
without CUDA the process tests check the 'no CUDA' error instead."""
import json
import subprocess
import time

import pytest

from conftest import MODEL, ROOT, free_port, sparsed_bin


def serve(*args, timeout=60):
    return subprocess.run([sparsed_bin(), "serve", "--model", str(MODEL), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def printed_config(*args):
    r = serve(*args, "--print-config")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_defaults_and_flags():
    c = printed_config()
    assert c["tp_rank"] == -1 and c["tp_addr"] == "" and c["tp_timeout"] == 120
    c = printed_config("--backend", "cuda", "--tensor-parallel", "4", "--tp-rank", "3",
                       "--tp-addr", "10.0.0.1:29500", "--tp-timeout=30")
    assert (c["tensor_parallel"], c["tp_rank"], c["tp_addr"], c["tp_timeout"]) == \
        (4, 3, "10.0.0.1:29500", 30)


def test_config_file_keys(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"backend": "cuda", "tensor_parallel": 2, "tp_rank": 1,
                               "tp_addr": "[::1]:29500"}))
    c = printed_config("--config", cfg)
    assert (c["tp_rank"], c["tp_addr"]) == (1, "[::1]:29500")
    cfg.write_text(json.dumps({"tp_rank": "1"}))
    r = serve("--config", cfg, "--print-config")
    assert r.returncode == 2 and "tp_rank" in r.stderr and "number" in r.stderr, r.stderr


@pytest.mark.parametrize("args,words", [
    (["--tp-rank", "1"], ["tp_rank", "tensor_parallel >= 2"]),
    (["--tensor-parallel", "2", "--tp-rank", "1", "--tp-addr", "h:1"], ["tp_rank", "backend cuda"]),
    (["--backend", "cuda", "--tensor-parallel", "2", "--tp-rank", "2", "--tp-addr", "h:1"],
     ["tp_rank", "not a rank", "0..1"]),
    (["--backend", "cuda", "--tensor-parallel", "2", "--tp-rank", "1"], ["tp_addr", "host:port"]),
    (["--backend", "cuda", "--tensor-parallel", "2", "--tp-rank", "1", "--tp-addr", "localhost"],
     ["tp_addr", "'localhost'"]),
    (["--backend", "cuda", "--tensor-parallel", "2", "--tp-rank", "1", "--tp-addr", "h:0"],
     ["tp_addr", "1..65535"]),
    (["--backend", "cuda", "--tensor-parallel", "2", "--tp-rank", "1", "--tp-addr", "h:80x"],
     ["tp_addr", "'h:80x'"]),
    (["--tp-addr", "h:80"], ["tp_addr", "only used with tp_rank"]),
    (["--tp-rank", "-2"], ["--tp-rank", "out of range"]),
    (["--tp-rank", "64"], ["--tp-rank", "out of range"]),
    (["--tp-timeout", "0.5"], ["--tp-timeout", "out of range"]),
    (["--tp-rank", "one"], ["--tp-rank", "not a number"]),
])
def test_bad_flags(args, words):
    r = serve(*args, "--print-config")
    assert r.returncode == 2, (args, r.returncode, r.stdout)
    for w in words:
        assert w in r.stderr, (args, w, r.stderr)


def test_help_lists_the_keys():
    r = subprocess.run([sparsed_bin(), "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    for flag in ("--tp-rank", "--tp-addr", "--tp-timeout"):
        assert flag in r.stdout


def group_args(addr, rank, *extra):
    return ["--backend", "cuda", "--tensor-parallel", "2", "--tp-rank", rank, "--tp-addr", addr,
            "--log-level", "info", *extra]


def skip_without_cuda(r):
    if "no CUDA" in r.stderr:
        pytest.skip("this build has no CUDA: " + r.stderr.strip().splitlines()[-1])


def test_follower_alone_gives_up():
    addr = f"127.0.0.1:{free_port()}"  # nobody listens there
    t0 = time.time()
    r = serve(*group_args(addr, 1, "--tp-timeout", "2"))
    took = time.time() - t0
    skip_without_cuda(r)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "rank 1" in r.stderr and addr in r.stderr and "timed out" in r.stderr, r.stderr
    assert took < 30, took


def test_rank0_alone_gives_up():
    addr = f"127.0.0.1:{free_port()}"
    r = serve(*group_args(addr, 0, "--tp-timeout", "2", "--port", free_port()))
    skip_without_cuda(r)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "rank(s) 1" in r.stderr and "timed out" in r.stderr, r.stderr


def test_ranks_with_other_step_options_are_refused():
    """A follower with another block size would read rank 0's block tables wrongly: refused at
    the bootstrap, by a config hash that covers block_size and max_batch_tokens."""
    addr = f"127.0.0.1:{free_port()}"
    rank0 = subprocess.Popen([sparsed_bin(), "serve", "--model", str(MODEL),
                              *map(str, group_args(addr, 0, "--tp-timeout", "5", "--port", free_port()))],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.3)
        r = serve(*group_args(addr, 1, "--tp-timeout", "5", "--block-size", "32"))
        out0, _ = rank0.communicate(timeout=60)
    finally:
        if rank0.poll() is None:
            rank0.kill()
            rank0.wait()
    skip_without_cuda(r)
    assert r.returncode == 1 and "config hash" in r.stderr, r.stderr
    assert rank0.returncode == 1 and "rank(s) 1" in out0 and "config hash" in out0, out0


def test_follower_waits_for_rank0_on_sigterm():
    """A follower outlives its first SIGTERM (rank 0, still draining, needs it) and leaves at a
    second one."""
    addr = f"127.0.0.1:{free_port()}"  # no rank 0: the follower keeps trying to join
    p = subprocess.Popen([sparsed_bin(), "serve", "--model", str(MODEL),
                          *map(str, group_args(addr, 1, "--tp-timeout", "60"))],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        if p.poll() is not None:
            r = subprocess.CompletedProcess(p.args, p.returncode, *p.communicate())
            skip_without_cuda(r)
            pytest.fail(f"the follower exited early: {r.returncode} {r.stderr}")
        p.terminate()
        time.sleep(1.0)
        assert p.poll() is None, "the first SIGTERM ended the follower"
        t0 = time.time()
        p.terminate()
        _, err = p.communicate(timeout=10)
        assert time.time() - t0 < 5
        assert p.returncode == 1 and "stopping with rank 0" in err, (p.returncode, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
