#!/usr/bin/env python3
"""tune_edit.py IN OUT ROWS:COLS=RW[/SPLIT] ...: a copy of a tuning cache (engine/tune_cache.h)
with the kernel configs of the named linear shapes replaced, so that `bench decode --tune-cache
OUT` runs the step with those configs (the batch-1 entries; results/2026-12-02-s14/run3.sh)."""
import json
import sys

src, dst, *edits = sys.argv[1:]
cache = json.load(open(src))
for e in edits:
    shape, cfg = e.split("=")
    rows, cols = (int(v) for v in shape.split(":"))
    rw, _, split = cfg.partition("/")
    hit = [k for k in cache["kernels"] if k["rows"] == rows and k["cols"] == cols and k["B"] == 1]
    if not hit:
        sys.exit(f"tune_edit: no batch-1 entry for {rows}x{cols} in {src}")
    for k in hit:
        k["rows_per_warp"] = int(rw)
        if split:
            k["split"] = int(split)
json.dump(cache, open(dst, "w"))
