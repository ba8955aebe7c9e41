#!/usr/bin/env python3
"""sdload: a load generator for any OpenAI-compatible server (/v1/completions or
/v1/chat/completions, streamed over SSE). Open-loop arrivals (Poisson, gamma-bursty or fixed
rate) or a fixed number of closed-loop clients; random prompts of given lengths (ignore_eos for
fixed-length outputs), a prompts file, shared prefixes, mixes of long and short prompts, and
clients that cancel mid-stream. Reports what vLLM's `bench serve` reports (TTFT, TPOT, ITL,
E2E latency percentiles, throughput, goodput) plus HTTP status counts, as text and JSON.

  sdload.py --base-url http://127.0.0.1:8000 --num-prompts 200 --request-rate 1,2,4,inf \\
            --input-len 64 --output-len 32 --ignore-eos --result-json out.json --plot out.png
"""
import argparse
import asyncio
import json
import math
import os
import platform
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdload_data as data  # noqa: E402
import sdload_stats as stats  # noqa: E402

try:
    import httpx
except ImportError:  # pragma: no cover - httpx comes with the openai package
    sys.exit("sdload: the httpx package is required (pip install httpx)")


def build_body(args, p):
    body = {"model": args.model, "max_tokens": p.output_len, "stream": not args.no_stream,
            "temperature": args.temperature}
    if args.ignore_eos:
        body["ignore_eos"] = True
    if not args.no_stream:
        body["stream_options"] = {"include_usage": True}
    if args.endpoint.endswith("/chat/completions"):
        body["messages"] = [{"role": "user", "content": p.text if p.text is not None else ""}]
    else:
        body["prompt"] = p.ids if p.ids is not None else p.text
    if args.extra_body:
        body.update(json.loads(args.extra_body))
    return body


def carries_token(chunk):
    """True if a stream chunk carries generated text (chat role-only openers do not)."""
    for c in chunk.get("choices") or ():
        if c.get("text") or c.get("logprobs"):
            return True
        d = c.get("delta") or {}
        if d.get("content") or d.get("reasoning_content") or d.get("tool_calls"):
            return True
    return False


async def send(client, args, p, cancel_after=0):
    """Sends one request and times it. cancel_after > 0: close the stream after that many
    token-carrying chunks (a client that goes away)."""
    r = stats.Result()
    body = build_body(args, p)
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", args.endpoint, json=body) as resp:
            r.status = resp.status_code
            if resp.status_code != 200:
                text = (await resp.aread()).decode(errors="replace")
                r.error = f"HTTP {resp.status_code}: {text[:200]}"
            elif args.no_stream:
                o = json.loads(await resp.aread())
                u = o.get("usage") or {}
                r.prompt_tokens, r.output_tokens = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
                r.ttft = time.perf_counter() - t0
                r.ok = True
            else:
                await read_stream(resp, r, t0, cancel_after)
    except (httpx.HTTPError, OSError, ValueError) as e:
        r.error = f"{type(e).__name__}: {e}"[:200]
    r.latency = time.perf_counter() - t0
    return r


async def read_stream(resp, r, t0, cancel_after):
    last, n_chunks = None, 0
    async for line in resp.aiter_lines():
        if not line:
            continue
        if not line.startswith("data: "):
            r.error = f"bad SSE line: {line[:80]!r}"
            return
        payload = line[6:]
        if payload == "[DONE]":
            r.ok = not r.error
            if not r.output_tokens:  # no usage chunk: count the chunks
                r.output_tokens = n_chunks
            return
        chunk = json.loads(payload)
        if "error" in chunk:
            r.error = "stream error: " + str(chunk["error"].get("message", chunk["error"]))[:160]
            return
        u = chunk.get("usage")
        if u:
            r.prompt_tokens, r.output_tokens = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
        if carries_token(chunk):
            now = time.perf_counter() - t0
            if r.ttft is None:
                r.ttft = now
            else:
                r.itl.append(now - last)
            last = now
            n_chunks += 1
            if cancel_after and n_chunks >= cancel_after:
                r.cancelled = True
                r.output_tokens = n_chunks
                return  # leaving the `async with` closes the connection
    r.error = r.error or "stream ended without [DONE]"


class Progress:
    """Counts for the progress line, printed to stderr every `interval` seconds."""

    def __init__(self, total, label, interval):
        self.total, self.label, self.interval = total, label, interval
        self.sent = self.done = self.failed = self.rejected = self.cancelled = self.tokens = 0
        self.t0 = time.perf_counter()

    def add(self, r):
        self.done += 1
        self.tokens += r.output_tokens
        if r.status == 429:
            self.rejected += 1
        elif r.cancelled:
            self.cancelled += 1
        elif not r.ok:
            self.failed += 1

    def line(self):
        dt = time.perf_counter() - self.t0
        tot = f"/{self.total}" if self.total else ""
        return (f"[{self.label} {dt:7.1f}s] done {self.done}{tot} in-flight {self.sent - self.done} "
                f"failed {self.failed} 429 {self.rejected} cancelled {self.cancelled} "
                f"out {self.tokens / dt if dt else 0:.1f} tok/s")

    async def run(self):
        if self.interval <= 0:
            return
        while True:
            await asyncio.sleep(self.interval)
            print(self.line(), file=sys.stderr, flush=True)


def cancel_plan(args, rng):
    """0 (read to the end) or the number of token chunks after which to hang up."""
    if args.cancel_fraction and rng.random() < args.cancel_fraction:
        return rng.randint(1, max(1, args.cancel_after))
    return 0


async def run_load(client, args, prompts, kind, value, label):
    """One load level: kind 'rate' (open loop, value req/s, inf = all at once) or 'clients'
    (value closed-loop clients). With --duration, prompts are reused until time runs out."""
    rng = random.Random(args.seed + 1)
    prog = Progress(0 if args.duration else len(prompts), label, args.progress_interval)
    sem = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None
    results = []
    t_start = time.perf_counter()
    deadline = t_start + args.duration if args.duration else None

    async def one(p):
        if sem:
            await sem.acquire()
        try:
            prog.sent += 1
            r = await send(client, args, p, cancel_plan(args, rng))
            r.start = time.perf_counter() - t_start - r.latency
            results.append(r)
            prog.add(r)
        finally:
            if sem:
                sem.release()

    def prompt_stream():
        i = 0
        while (deadline is None and i < len(prompts)) or (deadline and time.perf_counter() < deadline):
            yield prompts[i % len(prompts)]
            i += 1

    ticker = asyncio.create_task(prog.run())
    try:
        if kind == "clients":
            it = prompt_stream()

            async def client_loop():
                for p in it:
                    await one(p)

            await asyncio.gather(*(client_loop() for _ in range(int(value))))
        else:
            tasks = []
            for i, p in enumerate(prompt_stream()):
                if i and not math.isinf(value):
                    gap = (1.0 / value if args.arrival == "fixed"
                           else rng.gammavariate(args.burstiness, 1.0 / (value * args.burstiness)))
                    await asyncio.sleep(gap)
                tasks.append(asyncio.create_task(one(p)))
            await asyncio.gather(*tasks)
    finally:
        ticker.cancel()
    duration = time.perf_counter() - t_start
    if args.progress_interval > 0:
        print(prog.line(), file=sys.stderr, flush=True)
    return results, duration


def load_levels(args):
    if args.concurrency:
        return "clients", [(float(v), v) for v in args.concurrency.split(",")]
    vals = args.request_rate.split(",")
    return "rate", [(float(v), v) for v in vals]


def make_prompts(args, tok):
    n = args.num_prompts
    use_ids = args.prompt_ids and not args.endpoint.endswith("/chat/completions")
    if args.dataset == "file":
        return data.file_prompts(args.prompts_file, n, args.output_len, args.seed, tok)
    common = dict(seed=args.seed, tok=tok, use_ids=use_ids, vocab=args.vocab_size)
    if args.dataset == "shared-prefix":
        return data.random_prompts(n, args.input_len, args.output_len, args.range_ratio, prefix_len=args.prefix_len,
                                   num_prefixes=args.num_prefixes, **common)
    if args.dataset == "mixed":  # a fraction of long prompts among short ones
        n_long = int(round(n * args.long_fraction))
        long = data.random_prompts(n_long, args.long_input_len, args.output_len, args.range_ratio, **common)
        short = data.random_prompts(n - n_long, args.input_len, args.output_len, args.range_ratio,
                                    **{**common, "seed": args.seed + 7})
        return data.mixed([long, short], args.seed)
    return data.random_prompts(n, args.input_len, args.output_len, args.range_ratio, **common)


def machine_info():
    info = {"host": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count()}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["mem_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1)
    except (OSError, ValueError):
        pass
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        pass
    return info


def saturation(runs):
    """The first load level whose output throughput is within 5% of the best one."""
    if len(runs) < 2:
        return None
    best = max(r["output_throughput"] for r in runs)
    for r in runs:
        if r["output_throughput"] >= 0.95 * best:
            return r["load"]
    return None


def table(runs, file=None):
    h = (f"{'load':>8} {'ok':>6} {'fail':>5} {'429':>5} {'req/s':>7} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p99':>9} "
         f"{'TPOT p50':>9} {'TPOT p99':>9} {'ITL p99':>8} {'E2E p99':>9}")
    print(h, file=file)
    for r in runs:
        print(f"{r['load']:>8} {r['completed']:>6} {r['failed']:>5} {r['rejected_429']:>5} "
              f"{r['request_throughput']:>7.2f} {r['output_throughput']:>8.1f} {r['ttft_ms']['median']:>9.1f} "
              f"{r['ttft_ms']['p99']:>9.1f} {r['tpot_ms']['median']:>9.1f} {r['tpot_ms']['p99']:>9.1f} "
              f"{r['itl_ms']['p99']:>8.1f} {r['e2el_ms']['p99']:>9.1f}", file=file)


async def resolve_model(client):
    r = await client.get("/v1/models")
    r.raise_for_status()
    return r.json()["data"][0]["id"]


async def main_async(args):
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=args.keepalive)
    tok = data.Tokenizer(args.tokenizer) if args.tokenizer else None
    async with httpx.AsyncClient(base_url=args.base_url.rstrip("/"), headers=headers, limits=limits,
                                 timeout=httpx.Timeout(args.timeout, connect=30.0)) as client:
        if not args.model:
            args.model = await resolve_model(client)
        prompts = make_prompts(args, tok)
        if args.warmup:  # excluded from every measurement
            warm = data.random_prompts(args.warmup, min(args.input_len, 16), min(args.output_len, 8), seed=99,
                                       tok=tok, use_ids=bool(prompts[0].ids), vocab=args.vocab_size)
            await asyncio.gather(*(send(client, args, p) for p in warm))
        kind, levels = load_levels(args)
        runs = []
        for value, label in levels:
            results, duration = await run_load(client, args, prompts, kind, value, f"{kind}={label}")
            s = stats.summarize(results, duration, stats.parse_slos(args.goodput))
            s.update(load=label, load_kind="request rate (req/s)" if kind == "rate" else "concurrent clients",
                     load_value=value if not math.isinf(value) else (
                         2 * max([v for v, _ in levels if not math.isinf(v)] or [1])))
            if not args.quiet:
                stats.report(s, f"{kind} = {label}")
            runs.append(s)
            if args.save_requests:
                s["requests"] = [r.__dict__ for r in results]
            if args.pause and value != levels[-1][0]:
                await asyncio.sleep(args.pause)
    return runs


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("target")
    g.add_argument("--base-url", default="http://127.0.0.1:8000")
    g.add_argument("--endpoint", default="/v1/completions", help="/v1/completions or /v1/chat/completions")
    g.add_argument("--model", default=None, help="model id (default: the first of /v1/models)")
    g.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    g.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, seconds")
    g.add_argument("--keepalive", type=int, default=64, help="idle keep-alive connections kept")
    g = ap.add_argument_group("load")
    g.add_argument("--request-rate", default="inf",
                   help="req/s, comma-separated for a sweep; inf sends everything at once")
    g.add_argument("--arrival", choices=("poisson", "fixed"), default="poisson")
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape: 1 = Poisson, <1 burstier")
    g.add_argument("--concurrency", default=None, help="closed-loop clients (comma list to sweep) instead of a rate")
    g.add_argument("--max-concurrency", type=int, default=0, help="cap on requests in flight (open loop)")
    g.add_argument("--num-prompts", type=int, default=100)
    g.add_argument("--duration", type=float, default=0, help="run each level this many seconds (reusing prompts)")
    g.add_argument("--warmup", type=int, default=0, help="requests sent first and not measured")
    g.add_argument("--pause", type=float, default=0.0, help="seconds between sweep levels")
    g.add_argument("--cancel-fraction", type=float, default=0.0, help="fraction of streams the client cancels")
    g.add_argument("--cancel-after", type=int, default=4, help="cancel after 1..N token chunks")
    g = ap.add_argument_group("dataset")
    g.add_argument("--dataset", choices=("random", "file", "shared-prefix", "mixed"), default="random")
    g.add_argument("--input-len", type=int, default=64)
    g.add_argument("--output-len", type=int, default=32)
    g.add_argument("--range-ratio", type=float, default=0.0, help="lengths uniform in len*(1±ratio)")
    g.add_argument("--prompts-file", help="JSONL ({\"prompt\": ..., \"max_tokens\": ...}) or one prompt per line")
    g.add_argument("--prefix-len", type=int, default=0, help="shared-prefix: tokens of the common prefix")
    g.add_argument("--num-prefixes", type=int, default=1)
    g.add_argument("--long-input-len", type=int, default=1024, help="mixed: length of the long prompts")
    g.add_argument("--long-fraction", type=float, default=0.1, help="mixed: fraction of long prompts")
    g.add_argument("--tokenizer", help="tokenizer.json (or its directory) for exact random-text lengths")
    g.add_argument("--prompt-ids", action="store_true", help="completions: send token-id prompts (exact lengths)")
    g.add_argument("--vocab-size", type=int, default=0, help="token-id prompts without --tokenizer: ids < this")
    g.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("sampling")
    g.add_argument("--ignore-eos", action="store_true", help="generate exactly max_tokens")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--no-stream", action="store_true", help="non-streamed requests (TTFT = latency)")
    g.add_argument("--extra-body", help="JSON object merged into every request body")
    g = ap.add_argument_group("output")
    g.add_argument("--goodput", nargs="*", help="SLOs in ms: ttft:500 tpot:100 e2el:5000")
    g.add_argument("--result-json", help="write the runs (and the command and machine) here")
    g.add_argument("--save-requests", action="store_true", help="per-request records in the JSON")
    g.add_argument("--plot", help="PNG of latency percentiles and throughput vs load (needs matplotlib)")
    g.add_argument("--plot-from", help="re-plot a previous --result-json file and exit")
    g.add_argument("--progress-interval", type=float, default=5.0, help="seconds between progress lines; 0: off")
    g.add_argument("--quiet", action="store_true", help="only the final table")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.plot_from:
        runs = json.load(open(args.plot_from))["runs"]
        return 0 if stats.plot(runs, args.plot or args.plot_from.replace(".json", ".png")) else 0
    if args.dataset == "file" and not args.prompts_file:
        sys.exit("sdload: --dataset file needs --prompts-file")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    machine = machine_info()  # before the run: the commit checked out when it started
    runs = asyncio.run(main_async(args))
    print()
    table(runs)
    sat = saturation(runs)
    if sat is not None:
        print(f"saturation: output throughput reaches 95% of its maximum at load {sat}")
    if args.result_json:
        out = {"command": " ".join([os.path.basename(sys.argv[0])] + (argv if argv is not None else sys.argv[1:])),
               "started": started, "machine": machine, "args": vars(args), "saturation_load": sat,
               "runs": runs}
        with open(args.result_json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    if args.plot:
        stats.plot(runs, args.plot)
    return 1 if any(r["failed"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
