"""sdload metrics: per-request records, the summary vLLM's `bench serve` prints (TTFT, TPOT, ITL,
end-to-end latency: mean, median, p90, p99; throughput; goodput against SLOs), HTTP status
counts, and an optional latency-vs-load plot (matplotlib, if installed)."""
import collections
import dataclasses
import math

PERCENTILES = (50, 90, 99)


@dataclasses.dataclass
class Result:
    """One request. Times are seconds from the moment it was sent."""
    status: int = 0  # HTTP status; 0: no answer (connection error)
    ok: bool = False  # the stream finished normally ([DONE] / a complete JSON body)
    cancelled: bool = False  # the client closed it on purpose
    error: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float = None  # first chunk that carries a token
    itl: list = dataclasses.field(default_factory=list)  # gaps between token-carrying chunks
    latency: float = 0.0  # until the last byte
    start: float = 0.0  # send time, relative to the run's start


def percentile(xs, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * p / 100.0
    f = math.floor(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def dist(xs, scale=1000.0):
    """mean, median and percentiles of xs (seconds) in ms."""
    xs = [x * scale for x in xs]
    d = {"mean": sum(xs) / len(xs) if xs else float("nan"), "std": 0.0}
    if len(xs) > 1:
        m = d["mean"]
        d["std"] = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    d["median"] = percentile(xs, 50)
    for p in PERCENTILES:
        d[f"p{p}"] = percentile(xs, p)
    return d


def tpot(r):
    """Time per output token after the first, as vLLM defines it."""
    if r.output_tokens > 1 and r.ttft is not None:
        return (r.latency - r.ttft) / (r.output_tokens - 1)
    return None


def parse_slos(specs):
    """["ttft:500", "tpot:50", "e2el:3000"] (ms) -> {"ttft": 0.5, ...} (s)."""
    out = {}
    for s in specs or ():
        k, _, v = s.partition(":")
        if k not in ("ttft", "tpot", "e2el") or not v:
            raise ValueError(f"bad SLO '{s}' (want ttft:MS, tpot:MS or e2el:MS)")
        out[k] = float(v) / 1000.0
    return out


def meets(r, slos):
    t = tpot(r)
    return ((r.ttft is not None and r.ttft <= slos["ttft"]) if "ttft" in slos else True) and \
        ((t is None or t <= slos["tpot"]) if "tpot" in slos else True) and \
        (r.latency <= slos["e2el"] if "e2el" in slos else True)


def summarize(results, duration, slos=None):
    """The metrics of one run (a JSON-able dict)."""
    done = [r for r in results if r.ok]
    cancelled = [r for r in results if r.cancelled]
    rejected = [r for r in results if r.status == 429]
    failed = [r for r in results if not r.ok and not r.cancelled and r.status != 429]
    statuses = collections.Counter(str(r.status) for r in results)
    out_toks = sum(r.output_tokens for r in done)
    in_toks = sum(r.prompt_tokens for r in done)
    s = {
        "completed": len(done), "failed": len(failed), "rejected_429": len(rejected), "cancelled": len(cancelled),
        "sent": len(results), "duration_s": duration, "total_input_tokens": in_toks,
        "total_output_tokens": out_toks, "request_throughput": len(done) / duration if duration else 0.0,
        "output_throughput": out_toks / duration if duration else 0.0,
        "total_token_throughput": (in_toks + out_toks) / duration if duration else 0.0,
        "http_status": dict(sorted(statuses.items())),
        "errors": collections.Counter(r.error for r in failed).most_common(5),
        "ttft_ms": dist([r.ttft for r in done if r.ttft is not None]),
        "tpot_ms": dist([t for t in map(tpot, done) if t is not None]),
        "itl_ms": dist([g for r in done for g in r.itl]),
        "e2el_ms": dist([r.latency for r in done]),
    }
    if slos:
        good = sum(1 for r in done if meets(r, slos))
        s["slo_ms"] = {k: v * 1000 for k, v in slos.items()}
        s["good_requests"] = good
        s["goodput"] = good / duration if duration else 0.0
    return s


def report(s, title="Serving Benchmark Result", file=None):
    """Prints a summary as vLLM's `bench serve` does."""
    w = 50

    def line(k, v, fmt="{:<40}{:<10}"):
        print(fmt.format(k, v), file=file)

    print("{s:{c}^{n}}".format(s=f" {title} ", n=w, c="="), file=file)
    line("Successful requests:", s["completed"])
    line("Failed requests:", s["failed"])
    line("Rejected requests (429):", s["rejected_429"])
    line("Cancelled by client:", s["cancelled"])
    line("Benchmark duration (s):", f"{s['duration_s']:.2f}")
    line("Total input tokens:", s["total_input_tokens"])
    line("Total generated tokens:", s["total_output_tokens"])
    line("Request throughput (req/s):", f"{s['request_throughput']:.2f}")
    if "goodput" in s:
        line("Request goodput (req/s):", f"{s['goodput']:.2f}")
    line("Output token throughput (tok/s):", f"{s['output_throughput']:.2f}")
    line("Total Token throughput (tok/s):", f"{s['total_token_throughput']:.2f}")
    for key, name, short in (("ttft_ms", "Time to First Token", "TTFT"),
                             ("tpot_ms", "Time per Output Token (excl. 1st token)", "TPOT"),
                             ("itl_ms", "Inter-token Latency", "ITL"),
                             ("e2el_ms", "End-to-end Latency", "E2EL")):
        d = s[key]
        print("{s:{c}^{n}}".format(s=name, n=w, c="-"), file=file)
        line(f"Mean {short} (ms):", f"{d['mean']:.2f}")
        line(f"Median {short} (ms):", f"{d['median']:.2f}")
        for p in PERCENTILES[1:]:
            line(f"P{p} {short} (ms):", f"{d[f'p{p}']:.2f}")
    print("{s:{c}^{n}}".format(s="HTTP status", n=w, c="-"), file=file)
    for k, v in s["http_status"].items():
        line(f"  {k if k != '0' else 'no answer'}:", v)
    for err, n in s["errors"]:
        line(f"  error x{n}:", err[:60])
    print("=" * w, file=file)


def plot(runs, path, xkey="load"):
    """Latency percentiles (TTFT, TPOT, E2EL; p50 and p99) and throughput against load.
    Returns False (with a message) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("sdload: matplotlib is not installed; skipping the plot (pip install matplotlib)")
        return False
    xs = list(range(len(runs)))  # evenly spaced levels: sweeps are usually geometric
    labels = [r["load"] for r in runs]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for ax, key, name in zip(axes, ("ttft_ms", "tpot_ms", "e2el_ms"), ("TTFT", "TPOT", "E2E latency")):
        for p, style in (("median", "o-"), ("p90", "s--"), ("p99", "^:")):
            ax.plot(xs, [r[key][p] for r in runs], style, label=p)
        ax.set_title(f"{name} (ms)")
        ax.set_xticks(xs, labels)
        ax.legend()
    axes[3].plot(xs, [r["output_throughput"] for r in runs], "o-", label="output tok/s")
    axes[3].plot(xs, [r["request_throughput"] for r in runs], "s--", label="req/s")
    axes[3].set_title("throughput")
    axes[3].set_xticks(xs, labels)
    axes[3].legend()
    for ax in axes:
        ax.set_xlabel(runs[0].get("load_kind", "load"))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True
