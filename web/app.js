// sparsed web console: chat (streaming over SSE), server charts from /metrics, prune jobs
// through the admin API. Plain JS, no dependencies; keys live in sessionStorage only.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_API = "sparsed.apiKey";
const KEY_ADMIN = "sparsed.adminToken";

// ---- HTTP helpers ------------------------------------------------------------------------

function authHeaders(admin) {
  const k = sessionStorage.getItem(admin ? KEY_ADMIN : KEY_API);
  return k ? { Authorization: "Bearer " + k } : {};
}

// The server's error body ({"error": {"message", "param", ...}}) as one readable line.
async function errorText(resp) {
  let msg = `HTTP ${resp.status} ${resp.statusText || ""}`.trim();
  try {
    const j = await resp.json();
    const e = j.error || j;
    if (e.message) msg += ": " + e.message;
    if (e.param) msg += ` (field: ${e.param})`;
  } catch (_) { /* not JSON */ }
  if (resp.status === 401) {
    msg += "\nThis server needs a key: enter it in the " +
      (resp.url.includes("/admin/") ? "Admin token" : "API key") + " field above.";
  }
  return msg;
}

async function api(path, opts = {}) {
  const headers = { ...authHeaders(opts.admin), ...(opts.body ? { "Content-Type": "application/json" } : {}) };
  const resp = await fetch(path, {
    method: opts.method || "GET", headers, signal: opts.signal,
    body: opts.body ? JSON.stringify(opts.body) : undefined,
  });
  if (!resp.ok) {
    const err = new Error(await errorText(resp));
    err.status = resp.status;
    throw err;
  }
  return opts.raw ? resp : resp.json();
}

function show(el, text) {
  el.textContent = text || "";
  el.hidden = !text;
}

// ---- Pages -------------------------------------------------------------------------------

const pages = ["chat", "server", "jobs"];

function route() {
  const page = pages.includes(location.hash.slice(1)) ? location.hash.slice(1) : "chat";
  for (const p of pages) {
    $("page-" + p).hidden = p !== page;
    const tab = $("tab-" + p);
    if (p === page) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  server.active(page === "server");
  jobs.active(page === "jobs");
}

// ---- Server info (model name for the chat page too) -------------------------------------

let info = null;

async function loadInfo() {
  try {
    info = await api("/info");
    show($("banner"), "");
    $("chat-model").textContent = info.model;
  } catch (e) {
    info = null;
    $("chat-model").textContent = "unavailable";
    show($("banner"), e.message);
    if (e.status === 503 || e.status === undefined) setTimeout(loadInfo, 2000); // loading, or unreachable
  }
  return info;
}

// ---- Chat --------------------------------------------------------------------------------

const chat = {
  history: [], // [{role, content}] of finished turns
  abort: null,
};

function numOrNull(id) {
  const v = $(id).value.trim();
  return v === "" ? null : Number(v);
}

function chatParams() {
  const p = { stream: true, stream_options: { include_usage: true } };
  const t = numOrNull("p-temperature"), tp = numOrNull("p-top-p"), tk = numOrNull("p-top-k");
  const mt = numOrNull("p-max-tokens"), seed = numOrNull("p-seed");
  if (t !== null) p.temperature = t;
  if (tp !== null) p.top_p = tp;
  if (tk !== null && tk > 0) p.top_k = tk;
  if (mt !== null) p.max_tokens = mt;
  if (seed !== null) p.seed = seed;
  const tb = numOrNull("p-think-budget");
  if (tb !== null && $("p-mode").value === "chat") p.thinking_token_budget = tb;
  if ($("p-ignore-eos").checked) p.ignore_eos = true;
  if (info) p.model = info.model;
  const fmt = $("p-format").value;
  if (fmt === "json_object") p.response_format = { type: "json_object" };
  if (fmt === "json_schema") {
    let schema;
    try {
      schema = JSON.parse($("p-schema").value);
    } catch (e) {
      throw new Error("Schema: not valid JSON (" + e.message + ")");
    }
    p.response_format = { type: "json_schema", json_schema: { name: "console", schema, strict: true } };
  }
  if (fmt === "tools") {
    if ($("p-mode").value !== "chat") throw new Error("Tool calls: only in chat mode");
    try {
      p.tools = JSON.parse($("p-tools").value);
    } catch (e) {
      throw new Error("Tools: not valid JSON (" + e.message + ")");
    }
    if (!Array.isArray(p.tools)) throw new Error("Tools: must be a list of {type, function}");
    p.tool_choice = $("p-tool-choice").value;
  }
  return p;
}

function addMessage(role, text) {
  $("messages-empty").hidden = true;
  const div = document.createElement("div");
  div.className = "msg " + role;
  const r = document.createElement("div");
  r.className = "role";
  r.textContent = role;
  const t = document.createElement("div");
  t.className = "text";
  t.textContent = text;
  div.append(r, t);
  $("messages").append(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

// Reads an SSE body and calls onData(json) per "data:" event until [DONE]. An error thrown by
// onData (an error event) or a bad chunk cancels the stream before it propagates.
async function readSSE(resp, onData) {
  const reader = resp.body.getReader();
  try {
    await readEvents(reader, onData);
  } catch (e) {
    reader.cancel().catch(() => {});
    throw e;
  }
}

async function readEvents(reader, onData) {
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
      const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      onData(JSON.parse(data));
    }
  }
}

function setStreaming(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
}

// A new element: tag, class, children (nodes or text).
function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  e.className = cls;
  e.append(...kids);
  return e;
}

// The reply's folding "Thinking" block (reasoning_content), made at its first piece.
function thinking(div, out) {
  let t = div.querySelector(".think");
  if (!t) {
    t = el("details", "think", el("summary", "", "Thinking"), el("div", "think-text"));
    t.open = true;
    out.before(t);
  }
  return t.querySelector(".think-text");
}

// The reply's tool calls, one block per call index: the name, then the arguments as they stream.
function toolCall(div, stats, tc) {
  let calls = div.querySelector(".calls");
  if (!calls) {
    calls = el("div", "calls");
    stats.before(calls);
  }
  let call = calls.querySelector(`[data-index="${tc.index}"]`);
  if (!call) {
    call = el("div", "call", el("span", "call-name"), el("span", "call-args"));
    call.dataset.index = String(tc.index);
    calls.append(call);
  }
  const f = tc.function || {};
  if (f.name) call.querySelector(".call-name").textContent = f.name;
  if (f.arguments) call.querySelector(".call-args").textContent += f.arguments;
}

async function send(text) {
  const mode = $("p-mode").value;
  let body;
  try {
    body = chatParams();
  } catch (e) { // a schema that does not parse: said before anything is sent, the text kept
    show($("chat-error"), e.message);
    $("prompt").value = text;
    return;
  }
  let path;
  if (mode === "chat") {
    const msgs = [];
    const sys = $("p-system").value.trim();
    if (sys) msgs.push({ role: "system", content: sys });
    msgs.push(...chat.history, { role: "user", content: text });
    body.messages = msgs;
    path = "/v1/chat/completions";
  } else {
    body.prompt = text;
    path = "/v1/completions";
  }
  show($("chat-error"), "");
  addMessage(mode === "chat" ? "user" : "prompt", text);
  const div = addMessage(mode === "chat" ? "assistant" : "completion", "");
  div.classList.add("streaming");
  const out = div.querySelector(".text");
  const stats = document.createElement("div");
  stats.className = "stats";
  div.append(stats);

  const ctl = new AbortController();
  chat.abort = ctl;
  setStreaming(true);
  const t0 = performance.now();
  let tFirst = null, tLast = null, chunks = 0, usage = null, finish = null;
  try {
    const resp = await api(path, { method: "POST", body, signal: ctl.signal, raw: true });
    await readSSE(resp, (ev) => {
      if (ev.error) throw new Error(ev.error.message || JSON.stringify(ev.error));
      if (ev.usage) usage = ev.usage;
      const c = ev.choices && ev.choices[0];
      if (!c) return;
      const piece = mode === "chat" ? (c.delta && c.delta.content) || "" : c.text || "";
      const thought = mode === "chat" && c.delta ? c.delta.reasoning_content || "" : "";
      if (thought) { // a thinking model's reasoning_content: apart, folded once the answer starts
        if (tFirst === null) tFirst = performance.now();
        tLast = performance.now();
        thinking(div, out).textContent += thought;
      }
      if (piece) {
        const t = div.querySelector(".think");
        if (t && !out.textContent) t.open = false;
        if (tFirst === null) tFirst = performance.now();
        tLast = performance.now();
        chunks++;
        out.textContent += piece;
        div.scrollIntoView({ block: "end" });
      }
      for (const tc of (mode === "chat" && c.delta && c.delta.tool_calls) || []) {
        if (tFirst === null) tFirst = performance.now();
        tLast = performance.now();
        toolCall(div, stats, tc);
      }
      if (c.finish_reason) finish = c.finish_reason;
    });
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else show($("chat-error"), e.message);
  } finally {
    chat.abort = null;
    setStreaming(false);
    div.classList.remove("streaming");
  }
  const n = usage ? usage.completion_tokens : chunks;
  const parts = [];
  if (tFirst !== null) parts.push(`TTFT ${(tFirst - t0).toFixed(0)} ms`);
  if (tFirst !== null && tLast > tFirst && n > 1) parts.push(`${((n - 1) / ((tLast - tFirst) / 1000)).toFixed(1)} tok/s`);
  parts.push(`${n} tokens`);
  if (finish) parts.push(finish);
  stats.textContent = parts.join(" · ");
  if (mode === "chat" && out.textContent) {
    chat.history.push({ role: "user", content: text }, { role: "assistant", content: out.textContent });
  }
}

function initChat() {
  $("chat-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = $("prompt").value;
    if (!text.trim() || chat.abort) return;
    $("prompt").value = "";
    send(text);
  });
  $("prompt").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $("chat-form").requestSubmit();
    }
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && chat.abort) chat.abort.abort();
  });
  $("stop").addEventListener("click", () => chat.abort && chat.abort.abort());
  $("clear").addEventListener("click", () => {
    if (chat.abort) chat.abort.abort();
    chat.history = [];
    for (const m of [...$("messages").querySelectorAll(".msg")]) m.remove();
    $("messages-empty").hidden = false;
    show($("chat-error"), "");
  });
  // Phones: the parameters start folded so the conversation is in view.
  if (window.matchMedia("(max-width: 720px)").matches) $("params-box").open = false;
  const syncMode = () => { $("p-system-label").hidden = $("p-mode").value !== "chat"; };
  $("p-mode").addEventListener("change", syncMode);
  syncMode();
  const syncFormat = () => {
    $("p-schema-label").hidden = $("p-format").value !== "json_schema";
    $("p-tools-box").hidden = $("p-format").value !== "tools";
  };
  $("p-format").addEventListener("change", syncFormat);
  syncFormat();
}

// ---- Metrics: Prometheus text -> numbers, histograms -> percentiles -----------------------

function parseMetrics(text) {
  const m = new Map(); // "name" or "name{labels}" -> value
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const sp = line.lastIndexOf(" ");
    m.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return m;
}

// Speculative decoding's drafts kept, "61 % of 1200", or "" before the server drafted any
// (spec_tokens off, or nothing repeated yet).
function specText(m) {
  const drafted = m.get("sparsed_spec_draft_tokens_total") || 0;
  const kept = m.get("sparsed_spec_accepted_tokens_total") || 0;
  return drafted ? `${((100 * kept) / drafted).toFixed(0)} % of ${drafted}` : "";
}

// The prefix cache's share of the prompt tokens looked up, "49 % of 73933", then the blocks it
// gave back for room once there are any and "cold entry" while its adaptive rule has new blocks
// enter at the eviction end (prompts cycling through more than the pool holds); "" before any
// lookup (prefix_caching off, or no request yet).
function prefixText(m) {
  const looked = m.get("sparsed_prefix_cache_queries_total") || 0;
  if (!looked) return "";
  const hit = m.get("sparsed_prefix_cache_hits_total") || 0;
  const evicted = m.get("sparsed_prefix_cache_evicted_blocks_total") || 0;
  let s = `${((100 * hit) / looked).toFixed(0)} % of ${looked}`;
  if (evicted) s += ` · ${evicted} blocks evicted`;
  if (m.get("sparsed_prefix_cache_cold_insertion")) s += " · cold entry";
  return s;
}

// "1980 MHz · 642 W" per GPU that reports its clocks on /metrics (NVML; the cuda backend), with
// "power-capped" / "hot" while the driver holds its clocks down, each led by its GPU's number when
// there are several; "" when none reports.
function gpuText(m) {
  const pre = 'sparsed_gpu_sm_clock_mhz{gpu="', out = [];
  for (const [k, mhz] of m) {
    if (!k.startsWith(pre)) continue;
    const id = k.slice(pre.length, -2), lab = `{gpu="${id}"}`;
    let t = `${mhz.toFixed(0)} MHz · ${(m.get("sparsed_gpu_power_watts" + lab) ?? 0).toFixed(0)} W`;
    if (m.get("sparsed_gpu_power_capped" + lab)) t += " · power-capped";
    if (m.get("sparsed_gpu_thermal_slowdown" + lab)) t += " · hot";
    out.push([id, t]);
  }
  return out.map(([id, t]) => (out.length > 1 ? `GPU ${id}: ${t}` : t)).join("; ");
}

// Cumulative buckets [[le, count]] of histogram `name`.
function buckets(m, name) {
  const out = [];
  const pre = name + '_bucket{le="';
  for (const [k, v] of m) {
    if (k.startsWith(pre)) out.push([k.slice(pre.length, -2) === "+Inf" ? Infinity : Number(k.slice(pre.length, -2)), v]);
  }
  return out.sort((a, b) => a[0] - b[0]);
}

// The q-quantile of cumulative buckets (linear within a bucket, as Prometheus does).
function quantile(bk, q) {
  if (!bk.length) return null;
  const total = bk[bk.length - 1][1];
  if (total <= 0) return null;
  const rank = q * total;
  let prevLe = 0, prevC = 0;
  for (const [le, c] of bk) {
    if (c >= rank) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * (c - prevC > 0 ? (rank - prevC) / (c - prevC) : 1);
    }
    prevLe = le; prevC = c;
  }
  return prevLe;
}

// Buckets of the interval between two scrapes; the cumulative ones when nothing new came.
function windowBuckets(cur, prev) {
  if (!prev) return cur;
  const d = cur.map(([le, c], i) => [le, c - (prev[i] ? prev[i][1] : 0)]);
  return d.length && d[d.length - 1][1] > 0 ? d : cur;
}

// ---- Charts: plain canvas line charts --------------------------------------------------

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

function drawChart(canvas, series, opts = {}) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600, h = canvas.clientHeight || 160;
  canvas.width = w * dpr;
  canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const padL = 44, padB = 16, padT = 8, padR = 8;
  let max = opts.max || 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
  if (max <= 0) max = 1;
  max = niceCeil(max);
  g.font = "11px system-ui, sans-serif";
  g.fillStyle = cssVar("--muted");
  g.strokeStyle = cssVar("--line");
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = padT + (h - padT - padB) * (1 - i / 4);
    g.beginPath(); g.moveTo(padL, y); g.lineTo(w - padR, y); g.stroke();
    g.fillText(fmtNum(max * i / 4), 2, y + 4);
  }
  g.fillText(opts.xLabel || "", padL, h - 2);
  const n = HISTORY;
  for (const s of series) {
    g.strokeStyle = cssVar(s.color);
    g.lineWidth = 2;
    g.beginPath();
    let started = false;
    s.values.forEach((v, i) => {
      if (v === null) { started = false; return; }
      const x = padL + (w - padL - padR) * (i + n - s.values.length) / (n - 1);
      const y = padT + (h - padT - padB) * (1 - v / max);
      if (started) g.lineTo(x, y); else { g.moveTo(x, y); started = true; }
    });
    g.stroke();
  }
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const f of [1, 2, 2.5, 5, 10]) if (v <= f * p) return f * p;
  return 10 * p;
}

function fmtNum(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k";
  if (v >= 10 || v === 0) return v.toFixed(0);
  return v.toFixed(v >= 1 ? 1 : 2);
}

function fmtDuration(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  if (d) return `${d}d ${h}h ${m}m`;
  if (h) return `${h}h ${m}m`;
  return m ? `${m}m ${Math.floor(s % 60)}s` : `${Math.floor(s)}s`;
}

// ---- Server page -------------------------------------------------------------------------

const HISTORY = 60;
const REFRESH_MS = 2000;

const server = {
  timer: null,
  prev: null, // {t, gen, ttft, itl}
  hist: { tps: [], running: [], waiting: [], kv: [], ttft50: [], ttft95: [], itl50: [], itl95: [] },

  active(on) {
    clearInterval(this.timer);
    this.timer = null;
    if (on) {
      this.tick();
      this.timer = setInterval(() => this.tick(), REFRESH_MS);
    }
  },

  push(key, v) {
    const a = this.hist[key];
    a.push(v);
    if (a.length > HISTORY) a.shift();
  },

  async tick() {
    const i = await loadInfo();
    if (i) {
      $("i-model").textContent = i.model;
      $("i-arch").textContent = `${i.architecture}, ${i.n_layers} layers`;
      $("i-ckpt").textContent = i.checkpoint === "dense" ? "dense" : `${i.checkpoint} (${i.sparsity})`;
      $("i-tp").textContent = String(i.tensor_parallel_size);
      $("i-len").textContent = `${i.max_model_len} tokens`;
      $("i-uptime").textContent = fmtDuration(i.uptime_seconds);
    }
    let m;
    try {
      const resp = await fetch("/metrics");
      if (!resp.ok) throw new Error(await errorText(resp));
      m = parseMetrics(await resp.text());
      show($("server-error"), "");
    } catch (e) {
      show($("server-error"), "Cannot read /metrics: " + e.message);
      return;
    }
    const t = performance.now() / 1000;
    const gen = m.get("sparsed_generation_tokens_total") || 0;
    const ttft = buckets(m, "sparsed_time_to_first_token_seconds");
    const itl = buckets(m, "sparsed_inter_token_latency_seconds");
    const p = this.prev;
    const tps = p && t > p.t ? Math.max(0, (gen - p.gen) / (t - p.t)) : null;
    const wt = windowBuckets(ttft, p && p.ttft), wi = windowBuckets(itl, p && p.itl);
    const ms = (v) => (v === null ? null : v * 1000);
    this.prev = { t, gen, ttft, itl };
    const running = m.get("sparsed_num_requests_running") ?? 0;
    const waiting = m.get("sparsed_num_requests_waiting") ?? 0;
    const kv = (m.get("sparsed_kv_cache_usage_ratio") ?? 0) * 100;
    this.push("tps", tps);
    this.push("running", running);
    this.push("waiting", waiting);
    this.push("kv", kv);
    this.push("ttft50", ms(quantile(wt, 0.5)));
    this.push("ttft95", ms(quantile(wt, 0.95)));
    this.push("itl50", ms(quantile(wi, 0.5)));
    this.push("itl95", ms(quantile(wi, 0.95)));
    $("s-tps").textContent = tps === null ? "–" : tps.toFixed(1);
    $("s-seqs").textContent = `${running} / ${waiting}`;
    $("s-kv").textContent = kv.toFixed(kv < 10 ? 2 : 1) + " %";
    $("s-gen").textContent = String(gen);
    const gpu = gpuText(m);
    $("s-gpu-box").hidden = !gpu;
    $("s-gpu").textContent = gpu || "–";
    const prefix = prefixText(m);
    $("s-prefix-box").hidden = !prefix;
    $("s-prefix").textContent = prefix || "–";
    const spec = specText(m);
    $("s-spec-box").hidden = !spec;
    $("s-spec").textContent = spec || "–";
    this.draw();
  },

  draw() {
    const H = this.hist;
    drawChart($("c-tps"), [{ values: H.tps, color: "--accent" }]);
    drawChart($("c-seqs"), [{ values: H.running, color: "--accent" }, { values: H.waiting, color: "--c2" }]);
    drawChart($("c-kv"), [{ values: H.kv, color: "--accent" }], { max: 100 });
    drawChart($("c-ttft"), [{ values: H.ttft50, color: "--accent" }, { values: H.ttft95, color: "--c2" }]);
    drawChart($("c-itl"), [{ values: H.itl50, color: "--accent" }, { values: H.itl95, color: "--c2" }]);
  },
};

// ---- Jobs page ---------------------------------------------------------------------------

const TERMINAL = ["succeeded", "failed", "cancelled"];

const jobs = {
  timer: null,

  active(on) {
    clearInterval(this.timer);
    this.timer = null;
    if (on) {
      this.refresh();
      this.timer = setInterval(() => this.refresh(), REFRESH_MS);
    }
  },

  async refresh() {
    if (!sessionStorage.getItem(KEY_ADMIN)) {
      show($("jobs-error"), "Enter the admin token to see and start jobs.");
      return;
    }
    try {
      const [list, model] = await Promise.all([
        api("/admin/v1/jobs", { admin: true }),
        api("/admin/v1/model", { admin: true }).catch(() => null),
      ]);
      show($("jobs-error"), "");
      if (model) this.showModel(model);
      this.render(Array.isArray(list) ? list : list.data || list.jobs || []);
    } catch (e) {
      const elsewhere = e.status === 404 && e.message.includes("admin_listen");
      show($("jobs-error"), elsewhere
        ? "The admin API listens on its own address on this server (admin_listen), not here.\n" + e.message
        : e.status === 404
          ? "The admin API is not enabled on this server (no admin token configured).\n" + e.message
          : e.message);
    }
  },

  shown: new Map(), // id -> {key, tr}: rows are rebuilt only when their job changed

  render(list) {
    const body = $("jobs-body");
    const order = [...list].reverse();
    const ids = order.map((j) => j.id).join(",");
    if (ids && ids === [...this.shown.keys()].join(",")) {
      // Same jobs in the same order: replace only the rows that changed, so a focused button
      // elsewhere in the table keeps its focus.
      for (const j of order) {
        const key = JSON.stringify(j), old = this.shown.get(j.id);
        if (old.key === key) continue;
        const tr = this.row(j);
        old.tr.replaceWith(tr);
        this.shown.set(j.id, { key, tr });
      }
      return;
    }
    body.replaceChildren();
    this.shown = new Map();
    if (!list.length) {
      const tr = body.insertRow();
      const td = tr.insertCell();
      td.colSpan = 5;
      td.className = "empty";
      td.textContent = "No jobs.";
      return;
    }
    for (const j of order) {
      const tr = this.row(j);
      body.append(tr);
      this.shown.set(j.id, { key: JSON.stringify(j), tr });
    }
  },

  row(j) {
    const tr = document.createElement("tr");
    tr.dataset.id = j.id;
    tr.dataset.state = j.state;
    const spec = j.spec || {};
    const cell = (...nodes) => { const td = tr.insertCell(); td.append(...nodes); return td; };
    const span = (cls, text) => { const s = document.createElement("span"); s.className = cls; s.textContent = text; return s; };
    cell(span("", j.id), document.createElement("br"),
      span("sub", [j.type, spec.pattern, spec.solver, spec.source].filter(Boolean).join(" · ")));
    cell(span("state " + j.state, j.state), document.createElement("br"), span("sub", j.phase || ""));
    const prog = document.createElement("progress");
    prog.max = 1;
    prog.value = j.state === "succeeded" ? 1 : Number(j.progress) || 0;
    prog.setAttribute("aria-label", `job ${j.id} progress`);
    const detail = [];
    if (j.layer && j.n_layers) detail.push(`layer ${j.layer}/${j.n_layers}`);
    const toks = j.tokens ?? j.tokens_collected;
    if (toks) detail.push(`${toks}${j.tokens_target ? "/" + j.tokens_target : ""} tokens`);
    if (j.eta_seconds !== undefined && j.eta_seconds !== null && !TERMINAL.includes(j.state)) detail.push(`ETA ${fmtDuration(j.eta_seconds)}`);
    detail.push(`${Math.round(prog.value * 100)} %`);
    const pc = cell(prog, document.createElement("br"), span("sub", detail.join(" · ")));
    if (j.error) pc.append(document.createElement("br"), span("sub state failed", j.error));
    if (j.activated) pc.append(document.createElement("br"), span("sub state succeeded", "activated"));
    cell(span("sub", j.output || spec.output || ""));
    const acts = cell();
    if (!TERMINAL.includes(j.state)) acts.append(this.button("Cancel", "cancel", () => this.cancel(j.id)));
    if (j.state === "succeeded" && (j.output || spec.output))
      acts.append(this.button("Activate", "activate", () => this.activate(j.output || spec.output)));
    return tr;
  },

  button(label, cls, fn) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = cls;
    b.textContent = label;
    b.addEventListener("click", fn);
    return b;
  },

  async cancel(id) {
    try {
      await api(`/admin/v1/jobs/${encodeURIComponent(id)}`, { method: "DELETE", admin: true });
    } catch (e) { show($("jobs-error"), e.message); }
    this.refresh();
  },

  // The model in service, and the swap in progress or the last one that failed.
  showModel(model) {
    let text = `${model.name || ""} — ${model.path || ""} (${model.sparsity || "?"})`;
    const sw = model.swap;
    if (sw && sw.state === "loading") text += ` · loading ${sw.path} (${fmtDuration(sw.elapsed_seconds)})…`;
    else if (sw && sw.state === "failed") text += ` · the swap to ${sw.path} failed: ${sw.error || "?"}`;
    $("admin-model").textContent = text;
  },

  // A swap loads in the background (202 Accepted): follow GET /admin/v1/model until it is done
  // (the chat page then names the new model) or failed (its error shown; the old model serves).
  async activate(path) {
    try {
      let swap = await api("/admin/v1/model", { method: "POST", admin: true, body: { path } });
      show($("jobs-error"), "");
      while (swap && swap.state === "loading") {
        await new Promise((r) => setTimeout(r, 500));
        const model = await api("/admin/v1/model", { admin: true });
        this.showModel(model);
        swap = model.swap;
      }
      if (swap && swap.state === "failed")
        show($("jobs-error"), `Activation failed; the previous model still serves.\n${swap.error || ""}`);
      loadInfo();
    } catch (e) { show($("jobs-error"), e.message); }
    this.refresh();
  },

  spec() {
    const s = {
      type: "prune",
      source: $("j-source").value,
      tokens_budget: Number($("j-budget").value),
      pattern: $("j-pattern").value,
      solver: $("j-solver").value,
      mode: $("j-mode").value,
      output: $("j-output").value.trim(),
      activate: $("j-activate").checked,
    };
    const model = $("j-model").value.trim();
    if (model) s.model = model;
    if (s.source === "decode") {
      const file = $("j-prompts-file").value.trim();
      if (file) s.prompts_file = file;
      else s.prompts = $("j-prompts").value.split("\n").map((l) => l.trim()).filter(Boolean);
    } else {
      s.text_file = $("j-text-file").value.trim();
    }
    return s;
  },

  init() {
    $("admin-token").value = sessionStorage.getItem(KEY_ADMIN) || "";
    $("admin-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const v = $("admin-token").value.trim();
      if (v) sessionStorage.setItem(KEY_ADMIN, v); else sessionStorage.removeItem(KEY_ADMIN);
      this.refresh();
    });
    const syncSource = () => {
      const decode = $("j-source").value === "decode";
      $("j-prompts-label").hidden = !decode;
      $("j-prompts-file-label").hidden = !decode;
      $("j-text-file-label").hidden = decode;
    };
    $("j-source").addEventListener("change", syncSource);
    syncSource();
    $("job-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        await api("/admin/v1/jobs", { method: "POST", admin: true, body: this.spec() });
        show($("jobs-error"), "");
      } catch (e) { show($("jobs-error"), e.message); }
      this.refresh();
    });
  },
};

// ---- Start -------------------------------------------------------------------------------

function initKey() {
  $("api-key").value = sessionStorage.getItem(KEY_API) || "";
  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = $("api-key").value.trim();
    if (v) sessionStorage.setItem(KEY_API, v); else sessionStorage.removeItem(KEY_API);
    loadInfo();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  initKey();
  initChat();
  jobs.init();
  window.addEventListener("hashchange", route);
  route();
  loadInfo();
});
