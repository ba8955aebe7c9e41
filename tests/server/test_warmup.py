"""The start-up warm-up (config key `warmup`, engine/warmup.h). With the CUDA backend the daemon
tunes every linear's kernels and captures every decode graph before /ready, so requests of any
batch size and prompt length afterwards cause no first-use tuning or capture (SD_TUNE_LOG
prints a line for each); with `--warmup false` they do, which shows the check can fail. The GPU
tests skip without a GPU; the CPU backend has nothing to warm up. `sparsed generate --warmup`
does the same before its timed prefill and decode."""
import concurrent.futures
import re
import subprocess

import pytest

from conftest import MODEL, gpu_count, sparsed_bin

FIRST_USE = re.compile(r"^(tune|graph|refine):", re.M)


def requests_of_every_shape(s):
    """Prompts of 1-40 words one at a time, then 1-8 at once, each generating a few tokens."""
    def one(words):
        st, _, body = s.post("/v1/completions", {"prompt": "x " * words, "max_tokens": 6, "temperature": 0})
        assert st == 200, body

    for words in (1, 3, 9, 20, 40):
        one(words)
    for conc in (2, 3, 5, 8):
        with concurrent.futures.ThreadPoolExecutor(conc) as ex:
            list(ex.map(one, [1 + 7 * i for i in range(conc)]))


def cuda_server(start_server, warmup):
    if gpu_count() < 1:
        pytest.skip("no GPU (nvidia-smi -L lists none)")
    s = start_server(["--backend", "cuda", "--max-seqs", "8", "--max-batch-tokens", "128", "--warmup", warmup],
                     env={"SD_TUNE_LOG": "1"}, ready=False)
    return s.wait_ready(timeout=300)


def test_cuda_warmup_leaves_no_first_use_work(start_server):
    s = cuda_server(start_server, "true")
    log = s.log_text()
    m = re.search(r"warm-up done: (\d+) steps in ([0-9.]+) s", log)
    assert m and int(m.group(1)) >= 20, log[-3000:]
    assert FIRST_USE.search(log), "the warm-up tuned nothing: SD_TUNE_LOG lines missing"
    before = len(log)
    requests_of_every_shape(s)
    after = s.log_text()[before:]
    assert not FIRST_USE.search(after), after[-3000:]


def test_cuda_without_warmup_tunes_on_first_use(start_server):
    s = cuda_server(start_server, "false")
    log = s.log_text()
    assert "warm-up" not in log
    before = len(log)
    requests_of_every_shape(s)
    assert FIRST_USE.search(s.log_text()[before:])


def test_cpu_backend_has_nothing_to_warm(start_server):
    s = start_server(["--backend", "cpu", "--warmup", "true"])
    assert "warm" not in s.log_text()
    st, _, body = s.post("/v1/completions", {"prompt": "def", "max_tokens": 3, "temperature": 0})
    assert st == 200, body


def generate(*args):
    r = subprocess.run([sparsed_bin(), "generate", "--model", str(MODEL), "--prompt", "def fib(n):",
                        "--max-tokens", "8", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def test_generate_warmup_flag_cpu():
    """`sparsed generate --warmup` on the CPU backend: nothing to warm, the same output."""
    plain, warm = generate(), generate("--warmup")
    assert "nothing to warm up on the cpu backend" in warm.stderr and "warm-up" not in plain.stderr
    assert warm.stdout == plain.stdout


def test_generate_warmup_flag_cuda():
    """`sparsed generate --backend cuda --warmup`: the warm-up runs before the timed prefill."""
    if gpu_count() < 1:
        pytest.skip("no GPU (nvidia-smi -L lists none)")
    r = generate("--backend", "cuda", "--warmup")
    m = re.search(r"warm-up: (\d+) steps in [0-9.]+ s", r.stderr)
    assert m and int(m.group(1)) >= 2, r.stderr
    assert r.stderr.index("warm-up:") < r.stderr.index("prompt tokens:")
