#!/usr/bin/env python3
"""ab_summary: the decode A/B of a GPU call as one table.

A results run folder (results/<date>/rN/) holds summary.txt, where tools/gpu_ab.sh copies every
decode row as `NAME | pattern | batch | ms/step | tok/s | speedup | GB | % roofline |`. A/B
scripts name their runs VARIANT-K (K: the alternation, e.g. cl0-1, cl1-1, cl0-2, cl1-2). This
prints, for each (pattern, batch), each variant's ms over its runs (min-max) and its median's
ratio to the base variant's, so that a change reads as a ratio measured side by side:

    python3 tools/ab_summary.py results/2026-12-02-tune/r3 --base cl0

--prof reads the folder's prof.txt instead: kernel timings (tools/gpu_ab.sh ab_prof, one line
`NAME SHAPE B=b PATTERN rw=R split=S: ... T us per launch`), one row per (pattern, batch, shape,
config), in microseconds:

    python3 tools/ab_summary.py results/2026-12-03-s18/r3 --prof --base old
"""
import argparse
import re
import statistics
import sys
from pathlib import Path

ROW = re.compile(r"^(\S+) \| ([a-z0-9:]+) \| (\d+) \| ([0-9.]+) \|")
RUN = re.compile(r"^(.*)-(\d+)$")
PROF = re.compile(r"^(\S+) (\S+) B=(\d+) (\S+) rw=(\d+) split=(\d+): .*?([0-9.]+) us per launch")


def add(cells, order, name, key, value):
    r = RUN.match(name)
    variant = r.group(1) if r else name
    if variant not in order:
        order.append(variant)
    cells.setdefault(key, {}).setdefault(variant, []).append(value)


def parse(text):
    """{(pattern, batch): {variant: [ms, ...]}} and the variants in order of appearance."""
    cells, order = {}, []
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            add(cells, order, m.group(1), (m.group(2), int(m.group(3))), float(m.group(4)))
    return cells, order


def parse_prof(text):
    """{(pattern, batch, shape, "rw/split"): {variant: [us, ...]}} and the variants in order."""
    cells, order = {}, []
    for line in text.splitlines():
        m = PROF.match(line)
        if m:
            name, shape, batch, pattern, rw, split, us = m.groups()
            add(cells, order, name, (pattern, int(batch), shape.replace(":", "x"), f"{rw}/{split}"), float(us))
    return cells, order


def pattern_key(p):
    """dense first, then N:M by M."""
    if p == "dense":
        return (0, 0)
    n, m = p.split(":")
    return (1, int(m), int(n))


def fmt_runs(v):
    lo, hi = min(v), max(v)
    s = f"{lo:.3f}" if lo == hi else f"{lo:.3f}-{hi:.3f}"
    return s + (f" ({len(v)})" if len(v) > 1 else "")


def table(cells, variants, base, keys=("pattern", "batch")):
    head = list(keys) + variants + [f"{v}/{base}" for v in variants if v != base]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key in sorted(cells, key=lambda k: (pattern_key(k[0]),) + tuple(k[1:])):
        row = cells[key]
        if not any(v in row for v in variants):
            continue
        cols = [str(k) for k in key] + [fmt_runs(row[v]) if v in row else "" for v in variants]
        b = statistics.median(row[base]) if base in row else None
        for v in variants:
            if v == base:
                continue
            ok = b is not None and v in row
            cols.append(f"{statistics.median(row[v]) / b:.3f}" if ok else "")
        out.append("| " + " | ".join(cols) + " |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a results run folder holding summary.txt, or the file itself")
    ap.add_argument("--base", help="the variant the ratios divide by (default: the first)")
    ap.add_argument("--variants", help="comma list: only these, in this order")
    ap.add_argument("--prof", action="store_true", help="kernel timings from prof.txt, not decode rows")
    args = ap.parse_args(argv)
    path = Path(args.run)
    if path.is_dir():
        path = path / ("prof.txt" if args.prof else "summary.txt")
    try:
        text = path.read_text()
    except OSError as e:
        print(f"ab_summary: {path}: {e.strerror}", file=sys.stderr)
        return 2
    cells, order = parse_prof(text) if args.prof else parse(text)
    if not cells:
        print(f"ab_summary: {path}: no {'timing lines' if args.prof else 'decode rows'}", file=sys.stderr)
        return 1
    variants = args.variants.split(",") if args.variants else order
    unknown = [v for v in variants if v not in order]
    if unknown:
        print(f"ab_summary: no runs of {', '.join(unknown)} (have: {', '.join(order)})", file=sys.stderr)
        return 2
    base = args.base or variants[0]
    if base not in variants:
        print(f"ab_summary: base {base} is not among the variants {', '.join(variants)}", file=sys.stderr)
        return 2
    keys = ("pattern", "batch", "shape", "rw/split") if args.prof else ("pattern", "batch")
    print(table(cells, variants, base, keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
