"""tools/ab_summary.py: a GPU call's decode A/B (summary.txt rows named VARIANT-K) as one table of
each variant's runs and its median's ratio to a base variant; clear errors on a missing file, no
rows, or an unknown variant."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "ab_summary.py"

SUMMARY = """build 120 s: new ok
test attn_fused rc=0 128 s: 3 passed, 0 failed, 0 skipped
decode off-1 rc=0 130 s
off-1 | dense | 1 | 4.100 | 243.9 | 1.00x | 15.09 | 82.0% |
off-1 | 2:4 | 1 | 2.800 | 357.1 | 1.46x | 8.98 | 72.0% |
off-1 | dense | 16 | 5.200 | 3076.9 | 1.00x | 16.24 | 70.0% |
on-1 | dense | 1 | 4.000 | 250.0 | 1.00x | 15.09 | 84.0% |
on-1 | 2:4 | 1 | 2.700 | 370.4 | 1.48x | 8.98 | 74.0% |
off-2 | dense | 1 | 4.120 | 242.7 | 1.00x | 15.09 | 81.8% |
off-2 | 2:4 | 1 | 2.780 | 359.7 | 1.48x | 8.98 | 72.5% |
on-2 | dense | 1 | 4.020 | 248.8 | 1.00x | 15.09 | 83.6% |
on-2 | 2:4 | 1 | 2.720 | 367.6 | 1.48x | 8.98 | 73.5% |
rec-8b | 16:32 | 1 | 3.175 | 315.0 | 1.29x | 8.98 | 63.6% |
"""


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                          timeout=60)


def rows(out):
    """{(pattern, batch): [cells]} of the printed table."""
    lines = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    body = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        body[(cells[0], int(cells[1]))] = dict(zip(head, cells))
    return head, body


def test_table_ranges_and_ratios(tmp_path):
    (tmp_path / "summary.txt").write_text(SUMMARY)
    r = run(tmp_path, "--variants", "off,on")
    assert r.returncode == 0, r.stderr
    head, body = rows(r.stdout)
    assert head == ["pattern", "batch", "off", "on", "on/off"]
    assert body[("dense", 1)]["off"] == "4.100-4.120 (2)"
    assert body[("dense", 1)]["on"] == "4.000-4.020 (2)"
    assert body[("dense", 1)]["on/off"] == f"{4.010 / 4.110:.3f}"
    assert body[("2:4", 1)]["on/off"] == f"{2.710 / 2.790:.3f}"
    # a cell only the base has: its run, no ratio
    assert body[("dense", 16)]["off"] == "5.200" and body[("dense", 16)]["on/off"] == ""
    # dense first, then by pattern; the 16:32 row belongs to no listed variant
    assert list(body) == [("dense", 1), ("dense", 16), ("2:4", 1)]


def test_base_and_default_order(tmp_path):
    (tmp_path / "summary.txt").write_text(SUMMARY)
    r = run(tmp_path / "summary.txt", "--base", "on")
    assert r.returncode == 0, r.stderr
    head, body = rows(r.stdout)
    assert head == ["pattern", "batch", "off", "on", "rec-8b", "off/on", "rec-8b/on"]
    assert body[("dense", 1)]["off/on"] == f"{4.110 / 4.010:.3f}"
    assert body[("16:32", 1)]["rec-8b"] == "3.175"


def test_errors(tmp_path):
    r = run(tmp_path / "missing")
    assert r.returncode == 2 and "missing: No such file" in r.stderr
    (tmp_path / "summary.txt").write_text("build 120 s: new ok\n")
    r = run(tmp_path)
    assert r.returncode == 1 and "no decode rows" in r.stderr
    (tmp_path / "summary.txt").write_text(SUMMARY)
    r = run(tmp_path, "--variants", "off,nope")
    assert r.returncode == 2 and "no runs of nope" in r.stderr and "have: off, on, rec-8b" in r.stderr
    r = run(tmp_path, "--variants", "off", "--base", "on")
    assert r.returncode == 2 and "base on is not among" in r.stderr


PROF = """old-1 6144:4096 B=16 4:8 rw=24 split=1: 4:8 6144x4096 B=16 rw=24 split=1: 19.20 us per launch (mean of 100)
new-1 6144:4096 B=16 4:8 rw=24 split=1: 4:8 6144x4096 B=16 rw=24 split=1: 16.70 us per launch (mean of 100)
old-2 6144:4096 B=16 4:8 rw=24 split=1: 4:8 6144x4096 B=16 rw=24 split=1: 19.30 us per launch (mean of 100)
new-2 6144:4096 B=16 4:8 rw=24 split=1: 4:8 6144x4096 B=16 rw=24 split=1: 16.80 us per launch (mean of 100)
old-1 64x128 B=4 2:4 rw=128 split=4: 2:4 64x128 B=4 rw=128 split=4: 3.00 us per launch
new-1 64x128 B=4 2:4 rw=128 split=4: prof_spmv: launch failed
"""


def test_prof_timings(tmp_path):
    """--prof: prof.txt's kernel timings (tools/gpu_ab.sh ab_prof), a row per (pattern, batch,
    shape, config); a failed run leaves its cell empty."""
    (tmp_path / "prof.txt").write_text(PROF)
    r = run(tmp_path, "--prof", "--base", "old")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head == ["pattern", "batch", "shape", "rw/split", "old", "new", "new/old"]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]
    assert body[0] == ["2:4", "4", "64x128", "128/4", "3.000", "", ""]
    assert body[1] == ["4:8", "16", "6144x4096", "24/1", "19.200-19.300 (2)", "16.700-16.800 (2)",
                       f"{16.75 / 19.25:.3f}"]
    (tmp_path / "prof.txt").write_text("prof done 10 s\n")
    r = run(tmp_path, "--prof")
    assert r.returncode == 1 and "no timing lines" in r.stderr
