/* scaling-ladder dashboard: polls the read-only JSON API and draws with plotly.js (served locally).
 * Routes: #/<ladder>/<page>, page one of overview rungs fit hero moe compare tables.
 * The MoE page is drawn by moe.js, the Compare page by compare.js (loaded after this file, with its helpers).
 * #diag records what was drawn (page, traces, DAG nodes, errors) so a headless browser can check it. */
"use strict";

const PAGES = ["overview", "rungs", "fit", "hero", "moe", "compare", "tables"];
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
  "#bcbd22", "#7f7f7f"];
const STATUS_COLOR = { RUNNING: "#2f7ed8", SUCCESS: "#2e9d5b", FAILED: "#d0392b", DEP_FAILED: "#e07b39",
  BLOCKED: "#b7950b", PENDING: "#9aa3ad", IMPORTED: "#5e7d9a" };
const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
const params = new URLSearchParams(location.search);
const POLL_MS = Math.max(500, Number(params.get("poll")) || 3000);

const state = { ladder: null, page: "overview", ladders: [], timer: null, last: "", busy: false, moeRun: null, compareWith: null,
  heroX: "tokens", errors: [] };
const diag = document.getElementById("diag");

function recordError(msg) {
  state.errors.push(String(msg));
  diag.dataset.errors = String(state.errors.length);
  const p = document.createElement("p");
  p.className = "diag-error";
  p.textContent = String(msg);
  diag.appendChild(p);
}
window.addEventListener("error", (e) => recordError("error: " + (e.message || e.type)));
window.addEventListener("unhandledrejection", (e) => recordError("rejection: " + (e.reason && e.reason.message || e.reason)));

// ---------------------------------------------------------------------------------------------
// helpers

function esc(s) {
  return String(s === undefined || s === null ? "" : s).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function fmt(x, digits = 4) {
  if (x === null || x === undefined || x === "") return "";
  if (typeof x !== "number") return esc(x);
  if (!isFinite(x)) return "";
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return x.toExponential(2);
  if (Number.isInteger(x)) return String(x);
  return x.toPrecision(digits);
}
function dur(s) {
  if (typeof s !== "number" || !isFinite(s)) return "";
  if (s < 90) return Math.round(s) + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function when(t) {
  if (typeof t === "number" && t > 1e9) return new Date(t * 1000).toLocaleString();
  return t === null || t === undefined ? "" : String(t);
}
function color(i) { return PALETTE[i % PALETTE.length]; }
function api(path) { return "/api/ladders/" + encodeURIComponent(state.ladder) + path; }
function csvLink(table, label) {
  return `<a class="csv" href="${api("/tables/" + encodeURIComponent(table) + ".csv")}" download>${esc(label || "CSV")}</a>`;
}
async function getJSON(url) {
  const r = await fetch(url, { cache: "no-cache" });
  if (!r.ok) throw new Error(url + ": HTTP " + r.status);
  return r.text();
}
function card(title, body, extra = "") {
  return `<section class="card"><h2>${esc(title)}${extra}</h2>${body}</section>`;
}
function empty(msg) { return `<p class="empty">${esc(msg)}</p>`; }
function pill(status) {
  return `<span class="pill" style="background:${STATUS_COLOR[status] || "#777"}">${esc(status)}</span>`;
}
function table(rows, cols) {
  if (!rows || !rows.length) return empty("no rows");
  cols = cols || [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const head = cols.map((c) => `<th>${esc(c)}</th>`).join("");
  const body = rows.map((r) => "<tr>" + cols.map((c) => {
    const v = r[c];
    return typeof v === "number" ? `<td class="num">${fmt(v)}</td>` : `<td>${esc(v)}</td>`;
  }).join("") + "</tr>").join("");
  return `<div style="overflow-x:auto"><table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
}
function layout(title, xtitle, ytitle, extra = {}) {
  return Object.assign({
    title: { text: title, font: { size: 14 } }, margin: { l: 60, r: 20, t: 36, b: 44 },
    xaxis: { title: { text: xtitle }, zeroline: false }, yaxis: { title: { text: ytitle }, zeroline: false },
    legend: { font: { size: 11 } }, hovermode: "closest", paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    uirevision: state.ladder + state.page,
  }, extra);
}
function plot(id, traces, lay) {
  const el = document.getElementById(id);
  if (!el) return;
  Plotly.react(el, traces, lay, PLOT_CONFIG);
}
function xy(cols, xkey, ykey) {
  const xs = [], ys = [];
  const X = cols[xkey] || [], Y = cols[ykey] || [];
  for (let i = 0; i < Y.length; i++) {
    if (Y[i] !== null && X[i] !== null && X[i] !== undefined) { xs.push(X[i]); ys.push(Y[i]); }
  }
  return [xs, ys];
}
function band(cols, xkey, name, fill) {
  const [x1, lo] = xy(cols, xkey, "lower");
  const [x2, hi] = xy(cols, xkey, "upper");
  if (!lo.length || !hi.length) return [];
  return [
    { x: x1, y: lo, mode: "lines", line: { width: 0 }, hoverinfo: "skip", showlegend: false, name: name + " lower" },
    { x: x2, y: hi, mode: "lines", line: { width: 0 }, fill: "tonexty", fillcolor: fill, name: name },
  ];
}

// ---------------------------------------------------------------------------------------------
// routing and polling

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  return { ladder: parts[0] || null, page: PAGES.includes(parts[1]) ? parts[1] : "overview" };
}
function go(ladder, page) { location.hash = "#/" + encodeURIComponent(ladder) + "/" + page; }

async function loadLadders() {
  const text = await getJSON("/api/ladders");
  const data = JSON.parse(text);
  document.getElementById("rootpath").textContent = data.root;
  state.ladders = data.ladders.map((l) => l.name);
  const sel = document.getElementById("ladder");
  const want = state.ladders.join("\n");
  if (sel.dataset.names !== want) {
    sel.innerHTML = state.ladders.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
    sel.dataset.names = want;
  }
}

async function refresh(force) {
  if (state.busy) return;
  state.busy = true;
  try {
    if (!state.ladders.length || force) await loadLadders();
    const h = parseHash();
    if (!h.ladder || !state.ladders.includes(h.ladder)) {
      if (state.ladders.length) { go(state.ladders[0], h.page); return; }
      document.getElementById("main").innerHTML = card("No ladders yet",
        empty("No ladder under this root yet. Start one with: ladder submit experiments/tiny.py --root <this root>"));
      markDrawn();
      return;
    }
    const changedPage = h.ladder !== state.ladder || h.page !== state.page;
    state.ladder = h.ladder; state.page = h.page;
    document.getElementById("ladder").value = state.ladder;
    for (const a of document.querySelectorAll("#tabs a")) {
      a.classList.toggle("active", a.dataset.page === state.page);
      a.href = "#/" + encodeURIComponent(state.ladder) + "/" + a.dataset.page;
    }
    const text = await getJSON(api("/" + state.page));
    document.getElementById("banner").hidden = true;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    if (!changedPage && !force && text === state.last) return;   // nothing new on disk
    state.last = text;
    const data = JSON.parse(text);
    RENDER[state.page](data, changedPage);
    markDrawn();
  } catch (err) {
    const b = document.getElementById("banner");
    b.hidden = false;
    b.textContent = "cannot reach the dashboard server (" + err.message + "); retrying…";
  } finally {
    state.busy = false;
  }
}
function markDrawn() {
  diag.dataset.page = state.page;
  diag.dataset.traces = String(document.querySelectorAll(".js-plotly-plot .trace").length);
  diag.dataset.nodes = String(document.querySelectorAll(".dag-node").length);
  diag.dataset.charts = String(document.querySelectorAll(".js-plotly-plot").length);
  diag.dataset.renders = String(Number(diag.dataset.renders) + 1);
  diag.dataset.ready = "1";
}
function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(async () => {
    if (document.getElementById("live").checked && !document.hidden) await refresh(false);
    schedule();
  }, POLL_MS);
}

// ---------------------------------------------------------------------------------------------
// pages

const RENDER = {};

RENDER.overview = function (d) {
  const steps = d.steps || [];
  const main = document.getElementById("main");
  const rows = steps.map((s) => {
    const p = s.progress || {}, r = s.result || {};
    const done = p.total_steps ? `${p.step || 0}/${p.total_steps}` : "";
    return {
      step: s.name, status: s.status + (s.stale ? " (stale heartbeat)" : "") + (s.status === "IMPORTED" ? ": " + s.error : ""),
      progress: done,
      loss: p.loss !== undefined ? p.loss : (r.final_loss ?? r.final_eval_loss ?? r.loss),
      "tokens/s": s.tokens_per_s, eta: s.status === "RUNNING" ? dur(p.eta_s) : "", start: when(s.start), end: when(s.end), dir: s.dir || "",
    };
  });
  main.innerHTML = card("DAG", `<div class="dag" id="dag"></div>`, csvLink("steps", "steps.csv")) +
    card("Steps", table(rows, ["step", "status", "progress", "loss", "tokens/s", "eta", "start", "end", "dir"]));
  drawDag(document.getElementById("dag"), steps, d.edges || []);
};

function drawDag(host, steps, edges) {
  if (!steps.length) { host.innerHTML = empty("no steps yet"); return; }
  const names = steps.map((s) => s.name);
  const level = {};
  names.forEach((n) => (level[n] = 0));
  for (let k = 0; k < names.length; k++) {        // longest path layering
    for (const [a, b] of edges) if (a in level && b in level) level[b] = Math.max(level[b], level[a] + 1);
  }
  const cols = {};
  steps.forEach((s) => (cols[level[s.name]] = cols[level[s.name]] || []).push(s));
  const W = 150, H = 54, GX = 46, GY = 14;
  const ncol = Math.max(...Object.keys(cols).map(Number)) + 1;
  const maxRows = Math.max(...Object.values(cols).map((c) => c.length));
  const width = ncol * (W + GX) + 20, height = Math.max(1, maxRows) * (H + GY) + 20;
  const pos = {};
  for (const [c, list] of Object.entries(cols)) {
    const off = (height - list.length * (H + GY)) / 2;
    list.forEach((s, i) => (pos[s.name] = { x: 10 + Number(c) * (W + GX), y: off + i * (H + GY) + GY / 2 }));
  }
  let svg = `<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="ladder DAG">`;
  for (const [a, b] of edges) {
    if (!pos[a] || !pos[b]) continue;
    const x1 = pos[a].x + W, y1 = pos[a].y + H / 2, x2 = pos[b].x, y2 = pos[b].y + H / 2, mx = (x1 + x2) / 2;
    svg += `<path class="edge" d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}"/>`;
  }
  for (const s of steps) {
    const p = pos[s.name], pr = s.progress || {};
    const frac = pr.total_steps ? Math.min(1, (pr.step || 0) / pr.total_steps) : (s.status === "SUCCESS" ? 1 : 0);
    const loss = pr.loss !== undefined ? pr.loss : (s.result || {}).final_loss;
    const sub = s.status + (pr.total_steps && s.status === "RUNNING" ? ` ${Math.round(frac * 100)}%` : "") +
      (typeof loss === "number" ? ` · ${fmt(loss, 4)}` : "");
    svg += `<g class="dag-node" data-step="${esc(s.name)}" data-status="${esc(s.status)}" transform="translate(${p.x},${p.y})">` +
      `<title>${esc(s.name)}: ${esc(s.status)}${s.stale ? " (stale heartbeat)" : ""}${s.error ? " — " + esc(s.error) : ""}</title>` +
      `<rect class="box" width="${W}" height="${H}" rx="6" fill="${STATUS_COLOR[s.status] || "#777"}"/>` +
      `<rect x="6" y="${H - 9}" width="${W - 12}" height="4" rx="2" fill="rgba(255,255,255,.35)"/>` +
      `<rect class="bar" x="6" y="${H - 9}" width="${(W - 12) * frac}" height="4" rx="2" fill="#fff"/>` +
      `<text x="8" y="18" font-weight="600">${esc(s.name)}${s.stale ? " ⚠" : ""}</text>` +
      `<text class="sub" x="8" y="34">${esc(sub)}</text></g>`;
  }
  host.innerHTML = svg + "</svg>";
  for (const g of host.querySelectorAll(".dag-node")) {
    g.addEventListener("click", () => {
      const n = g.dataset.step;
      go(state.ladder, n === "hero" ? "hero" : ["fit", "predict", "gate"].includes(n) ? "fit" :
        n === "report" ? "tables" : "rungs");
    });
  }
}

RENDER.rungs = function (d) {
  const main = document.getElementById("main");
  const runs = d.runs || [];
  if (!runs.length && !(d.imported || []).length) {
    main.innerHTML = card("Rungs", empty("no training step has written metrics yet"));
    return;
  }
  const links = runs.map((r) => csvLink("metrics." + r.name, r.name + " metrics") + csvLink("eval." + r.name, "eval"))
    .join(" ");
  main.innerHTML = `<div class="grid2">
    ${card("Train loss vs tokens", `<div id="c-train-tok" class="chart"></div>`)}
    ${card("Eval loss per domain vs tokens", `<div id="c-eval-tok" class="chart"></div>`)}
    ${card("Train loss vs FLOPs", `<div id="c-train-flops" class="chart"></div>`)}
    ${card("Eval loss per domain vs FLOPs", `<div id="c-eval-flops" class="chart"></div>`)}
  </div>` + card("Downloads", links || empty("none"));
  const dashes = ["solid", "dash", "dot", "dashdot", "longdash"];
  for (const x of ["tokens", "flops"]) {
    const tr = [], ev = [];
    runs.forEach((r, i) => {
      const [xs, ys] = xy(r.train, x, "loss");
      if (ys.length) tr.push({ x: xs, y: ys, mode: "lines", name: r.name, line: { color: color(i), width: 1.4 } });
      const keys = Object.keys(r.eval || {}).filter((k) => k.startsWith("eval_loss"));
      keys.sort();
      keys.forEach((k, j) => {
        const [ex, ey] = xy(r.eval, x, k);
        if (ey.length) ev.push({ x: ex, y: ey, mode: "lines+markers", marker: { size: 4 },
          name: `${r.name} ${k === "eval_loss" ? "all" : k.slice(10)}`, legendgroup: r.name,
          line: { color: color(i), dash: dashes[j % dashes.length], width: 1.3 } });
      });
    });
    // a ladder imported from recorded eval curves has no train loss: imported runs sit beside its eval curves
    const trained = runs.some((r) => (r.train || {}).n);
    (d.imported || []).forEach((r) => {
      const [xs, ys] = xy(r.train, x, "loss");
      const hero = r.name.startsWith("hero");
      if (ys.length) (trained ? tr : ev).push({ x: xs, y: ys, mode: hero ? "markers" : "lines", name: "imported: " + r.name,
        line: { color: "#444", dash: "dot" }, marker: { color: "#1d232b", size: 5 } });
    });
    const xt = x === "tokens" ? "tokens" : "FLOPs";
    const sfx = x === "tokens" ? "tok" : "flops";
    for (const [kind, traces, yt] of [["train", tr, "train loss"], ["eval", ev, "eval loss"]]) {
      if (traces.length) plot(`c-${kind}-${sfx}`, traces, layout("", xt, yt, { xaxis: { type: "log", title: { text: xt } } }));
      else document.getElementById(`c-${kind}-${sfx}`).outerHTML = empty(kind === "train"
        ? "no train loss: these runs were imported as recorded eval curves" : "no eval loss " + (x === "flops" ? "with FLOPs " : "") + "recorded");
    }
  }
};

RENDER.fit = function (d) {
  const main = document.getElementById("main");
  const runs = d.runs || [];
  const names = [...new Set(runs.filter((r) => !r.kind || r.kind === "final").map((r) => r.name))];
  if (!runs.length && !d.law && !d.hero) {
    main.innerHTML = card("Fit", empty("no fit yet: the fit step runs when every rung has finished"));
    return;
  }
  const law = d.law || {};
  const p = law.params || {};
  const formula = law.compute_law && p.E !== undefined
    ? `L(C) = ${fmt(p.E)} + ${fmt(p.A)} · C<sup>−${fmt(p.alpha)}</sup>` : esc(law.law || "");
  const h = d.hero;
  const kv = `<div class="kv">
    <div><b>law</b><span>${formula || "—"}</span></div>
    <div><b>fitted on</b><span>${names.length} rungs (${names.map(esc).join(", ")})</span></div>
    ${h ? `<div><b>hero predicted final loss</b><span>${fmt(h.loss)} [${fmt(h.lower)}, ${fmt(h.upper)}]${h.level ? " @" + Math.round(h.level * 100) + "%" : ""}</span></div>` : ""}
    ${h && typeof h.actual === "number" ? `<div><b>hero actual</b><span>${fmt(h.actual)}</span></div>` : ""}
  </div>`;
  main.innerHTML = card("Loss against compute (log-log)", kv + `<div id="c-fit" class="chart tall"></div>`,
    csvLink("runs", "runs.csv") + csvLink("law_curve", "law.csv") + csvLink("targets", "targets.csv")) +
    `<div class="grid2">` +
    card("Backtest (rungs held out, predicted from the others)", `<div id="c-backtest" class="chart short"></div>` + table(d.backtest), csvLink("backtest")) +
    card("Law parameters and bootstrap intervals", table(d.params, ["param", "value", "lower", "upper", "level", "law"]),
      csvLink("fit_params")) + `</div>`;
  const traces = [];
  traces.push(...band(toCols(d.curve), "flops", "law band", "rgba(31,119,180,0.16)"));
  const [cx, cy] = xy(toCols(d.curve), "flops", "loss");
  if (cy.length) traces.push({ x: cx, y: cy, mode: "lines", name: "fitted law", line: { color: "#1f77b4", width: 2 } });
  const finals = runs.filter((r) => !r.kind || r.kind === "final");
  const others = runs.filter((r) => r.kind && r.kind !== "final");
  const rc = toCols(finals);
  const [rx, ry] = xy(rc, "flops", "loss");
  if (ry.length) traces.push({ x: rx, y: ry, mode: "markers", name: "rungs (final)", text: finals.map((r) => r.name),
    marker: { size: 9, color: "#ff7f0e", line: { color: "#fff", width: 1 } } });
  if (others.length) {
    const [ox, oy] = xy(toCols(others), "flops", "loss");
    if (oy.length) traces.push({ x: ox, y: oy, mode: "markers", name: "other points (" + [...new Set(others.map((r) => r.kind))].join(", ") + ")",
      text: others.map((r) => r.name + " " + r.kind), marker: { size: 6, color: "#ffbb78" } });
  }
  if (h) {
    traces.push({ x: [h.flops], y: [h.loss], mode: "markers", name: "hero (predicted)",
      marker: { size: 12, symbol: "diamond", color: "#d62728" },
      error_y: h.lower !== null && h.upper !== null ? { type: "data", symmetric: false, array: [h.upper - h.loss],
        arrayminus: [h.loss - h.lower], color: "#d62728" } : undefined });
    if (typeof h.actual === "number") traces.push({ x: [h.flops], y: [h.actual], mode: "markers", name: "hero (actual)",
      marker: { size: 11, symbol: "star", color: "#2ca02c" } });
  }
  const targets = (d.targets || []).filter((t) => typeof t.flops === "number" && typeof (t.loss ?? t.predicted_loss) === "number");
  if (targets.length) {
    const ty = targets.map((t) => t.loss ?? t.predicted_loss);
    const hasBand = targets.every((t) => typeof t.lower === "number" && typeof t.upper === "number");
    traces.push({ x: targets.map((t) => t.flops), y: ty, mode: "markers+text", name: "targets",
      text: targets.map((t) => t.name), textposition: "top center",
      marker: { size: 11, symbol: "square", color: "#9467bd" },
      error_y: hasBand ? { type: "data", symmetric: false, array: targets.map((t, i) => t.upper - ty[i]),
        arrayminus: targets.map((t, i) => ty[i] - t.lower), color: "#9467bd" } : undefined });
  }
  const bt = (d.backtest || []).filter((b) => typeof b.flops === "number" && typeof b.predicted === "number");
  if (bt.length) traces.push({ x: bt.map((b) => b.flops), y: bt.map((b) => b.predicted), mode: "markers",
    name: "backtest prediction", marker: { size: 9, symbol: "x", color: "#8c564b" } });
  plot("c-fit", traces, layout("", "training compute C (FLOPs)", "final loss",
    { xaxis: { type: "log", title: { text: "training compute C (FLOPs)" } }, yaxis: { type: "log", title: { text: "final loss" } } }));
  const bts = (d.backtest || []).filter((b) => typeof b.actual === "number" && typeof b.predicted === "number");
  if (bts.length) {
    plot("c-backtest", [
      { x: bts.map((b) => b.predict || b.name || b.held_out || b.run), y: bts.map((b) => b.actual), type: "bar", name: "actual", marker: { color: "#ff7f0e" } },
      { x: bts.map((b) => b.predict || b.name || b.held_out || b.run), y: bts.map((b) => b.predicted), type: "bar", name: "predicted", marker: { color: "#1f77b4" } },
    ], layout("", "held-out run", "final loss", { barmode: "group", margin: { l: 50, r: 10, t: 10, b: 40 },
      legend: { orientation: "h", y: 1.12 },
      yaxis: { title: { text: "final loss" }, range: [0.97 * Math.min(...bts.map((b) => Math.min(b.actual, b.predicted))),
        1.02 * Math.max(...bts.map((b) => Math.max(b.actual, b.predicted)))] } }));
  } else {
    document.getElementById("c-backtest").outerHTML = "";
  }
};

function toCols(rows) {
  const cols = {};
  (rows || []).forEach((r, i) => {
    for (const [k, v] of Object.entries(r)) {
      (cols[k] = cols[k] || new Array(rows.length).fill(null))[i] = typeof v === "number" ? v : null;
    }
  });
  return cols;
}

RENDER.hero = function (d) {
  const main = document.getElementById("main");
  const pred = d.predicted || {}, act = d.actual || {};
  if (!pred.loss && !act.loss) {
    main.innerHTML = card("Hero", empty("no prediction yet: the predict step writes the hero's curve before the hero starts"));
    return;
  }
  const xk = (pred.tokens || act.tokens) ? "tokens" : "step";
  const pr = d.prediction || {};
  const last = act.loss ? act.loss[act.loss.length - 1] : null;
  const exits = d.exits || [];
  const fc = d.forecasts || [];
  const comps = d.comparisons || {};
  // name only the baselines this ladder has: no empty "Marin's" column or title on a ladder without it
  const hasMarin = ((d.baseline || {}).loss || []).length > 0;
  const cmpRows = Object.entries(comps).map(([name, c]) => {
    const s = c.summary || {};
    const row = { actual: name, "compared from step": s.first_step, points: s.points, "outside band": s.outside,
      "% inside": typeof s.fraction_inside === "number" ? (100 * s.fraction_inside).toFixed(1) + "%" : "",
      "mean |error| ours": typeof s.mean_abs_error === "number" ? (100 * s.mean_abs_error).toFixed(2) + "%" : "" };
    if (hasMarin) row["mean |error| Marin's"] = typeof s.marin_mean_abs_error === "number" ? (100 * s.marin_mean_abs_error).toFixed(2) + "%" : "";
    return row;
  });
  const first = Object.values(comps)[0];
  const fs = first ? first.summary || {} : {};
  const kv = `<div class="kv">
    <div><b>status</b><span>${d.status ? pill(d.status) : Object.keys(comps).some((n) => n !== "hero")
      ? "trained elsewhere: " + esc(Object.keys(comps).filter((n) => n !== "hero").join(", ")) + " imported" : "not started"}</span></div>
    <div><b>predicted final loss</b><span>${fmt(pr.predicted_final_loss)} [${fmt(pr.lower)}, ${fmt(pr.upper)}]</span></div>
    ${last !== null ? `<div><b>latest train loss</b><span>${fmt(last)} at step ${fmt(act.step ? act.step[act.step.length - 1] : null)}</span></div>` : ""}
    ${fc.length ? `<div><b>latest forecast</b><span>${fmt(fc[fc.length - 1].predicted_final)} (at step ${fmt(fc[fc.length - 1].at_step)}${fc[fc.length - 1].centre_rule ? ", centre: " + esc(fc[fc.length - 1].centre_rule) : ""})</span></div>` : ""}
    <div><b>points outside the band</b><span class="${exits.length ? "warn" : ""}">${exits.length}${fs.points ? ` of ${fs.points} eval points (from step ${fmt(fs.first_step)})` : ""}</span></div>
    ${pr.law ? `<div><b>law</b><span>${esc(pr.law)}</span></div>` : ""}
  </div>`;
  main.innerHTML = card("Hero: predicted against actual", kv + `<div id="c-hero" class="chart tall"></div>`,
    csvLink("hero_curve", "predicted.csv") + csvLink("metrics.hero", "actual.csv") + csvLink("hero_points", "points.csv") +
    csvLink("band_exits", "exits.csv")) +
    (cmpRows.length ? card("Each actual point against the forecasts: ours" + (hasMarin ? " and Marin's" : ""), table(cmpRows) +
      `<div id="c-errors" class="chart short"></div>`, csvLink("hero_points", "points.csv")) : "") +
    `<div class="grid2">` +
    card("How the forecast moved as the hero trained", `<div id="c-forecasts" class="chart"></div>`, csvLink("forecasts")) +
    card("Forecast snapshots (refreshed predicted curves)", `<div id="c-snapshots" class="chart"></div>`) + `</div>` +
    (exits.length ? card(`Points outside the band (${exits.length}${exits.length > 50 ? ", first 50 shown" : ""})`,
      table(exits.slice(0, 50), ["step", "tokens", "loss", "predicted", "lower", "upper", "side", "error"]
        .concat(exits.some((e) => typeof e.marin === "number") ? ["marin", "marin_error"] : [])),
      csvLink("band_exits", "all as CSV")) : "") +
    ((d.tasks || []).length ? card(`Task accuracy forecasts (${d.tasks.length} tasks; the report's, method chosen by backtest on the rungs)`,
      table(d.tasks, ["task", "method", "predicted", "lower", "upper", "level", "actual", "error", "inside", "note"])) : "");
  const traces = [...band(pred, xk, "predicted band", "rgba(214,39,40,0.14)")];
  const [px, py] = xy(pred, xk, "loss");
  traces.push({ x: px, y: py, mode: "lines", name: "predicted", line: { color: "#d62728", dash: "dash", width: 2 } });
  const [ax, ay] = xy(act, xk, "loss");
  // scored on the eval points; the train loss is drawn faintly behind them
  if (ay.length) traces.push({ x: ax, y: ay, mode: "lines", name: "actual (train)", line: { color: "rgba(29,35,43,0.25)", width: 1 } });
  const [ex, ey] = xy(d.eval || {}, xk, "eval_loss");
  if (ey.length) traces.push({ x: ex, y: ey, mode: "lines+markers", name: "actual (eval)", line: { color: "#2ca02c" }, marker: { size: 5 } });
  const [bx, by] = xy(d.baseline || {}, xk, "loss");
  if (by.length) traces.push({ x: bx, y: by, mode: "lines+markers", name: "Marin's forecast", marker: { size: 5 },
    line: { color: "#6a3d9a", dash: "dash", width: 2 } });
  (d.imported || []).forEach((r) => {
    const [ix, iy] = xy(r, xk, "loss");
    const hero = r.name.startsWith("hero");
    if (iy.length) traces.push(hero
      ? { x: ix, y: iy, mode: "markers", name: "actual: " + r.name, marker: { color: "#1d232b", size: 6 } }
      : { x: ix, y: iy, mode: "lines", name: "imported: " + r.name, line: { color: "#7f7f7f", dash: "dot" } });
  });
  if (exits.length) {
    traces.push({ x: exits.map((e) => e[xk]), y: exits.map((e) => e.loss), mode: "markers", name: "outside band",
      marker: { symbol: "x", size: 9, color: "#ff00aa" }, text: exits.map((e) => `${e.side} the band`) });
  }
  const startX = fs.start;
  const heroLay = layout("", xk, "loss", { xaxis: { type: "log", title: { text: xk } } });
  if (typeof startX === "number" && fs.x === xk) {
    heroLay.shapes = [{ type: "line", xref: "x", yref: "paper", x0: startX, x1: startX, y0: 0, y1: 1,
      line: { color: "#888", dash: "dot", width: 1 } }];
    const ys = traces.flatMap((t) => t.x.map((x, i) => (x >= startX ? t.y[i] : null))).filter((v) => typeof v === "number");
    if (ys.length) heroLay.yaxis.range = [Math.min(...ys) * 0.985, Math.max(...ys) * 1.015];
    const xs = traces.flatMap((t) => t.x).filter((v) => typeof v === "number" && v > 0);
    heroLay.xaxis.range = [Math.log10(startX / 3), Math.log10(Math.max(...xs) * 1.1)];
  }
  const changes = d.changes || [];
  const alertsOf = (d.events || []).filter((e) => e.alert);
  if (changes.length) {
    heroLay.shapes = (heroLay.shapes || []).concat(changes.map((c) => ({ type: "line", xref: "x", yref: "paper",
      x0: c[xk], x1: c[xk], y0: 0, y1: 1, line: { color: "#ff7f0e", dash: "dash", width: 1.5 } })));
    heroLay.annotations = changes.map((c) => ({ x: Math.log10(c[xk]), y: 1, xref: "x", yref: "paper", showarrow: false,
      text: "change: " + esc(c.what) + (c.effect_ok ? " (its replayed rungs' effect carried)" : ""),
      hovertext: c.effect ? esc(c.effect) : undefined, font: { color: "#ff7f0e", size: 11 }, yanchor: "bottom" }));
  }
  const bandAlerts = alertsOf.filter((e) => e.kind === "band_exit" && typeof e.loss === "number");
  if (bandAlerts.length) traces.push({ x: bandAlerts.map((e) => (xk === "tokens" ? e.tokens : e.step)), y: bandAlerts.map((e) => e.loss),
    mode: "markers", name: "alert: left the band", marker: { symbol: "triangle-up", size: 12, color: "#ff7f0e" },
    text: bandAlerts.map((e) => e.message) });
  plot("c-hero", traces, heroLay);
  if (cmpRows.length) {
    const et = [];
    Object.entries(comps).forEach(([name, c]) => {
      const pts = c.points || {};
      const [ox, oy] = xy(pts, xk, "error");
      if (oy.length) et.push({ x: ox, y: oy.map((v) => 100 * v), mode: oy.length < 200 ? "lines+markers" : "lines",
        name: "ours (" + name + ")", line: { color: "#d62728" }, marker: { size: 5 } });
      const [mx, my] = xy(pts, xk, "marin_error");
      if (my.length) et.push({ x: mx, y: my.map((v) => 100 * v), mode: "lines+markers", name: "Marin's (" + name + ")",
        line: { color: "#6a3d9a", dash: "dash" }, marker: { size: 5 } });
    });
    plot("c-errors", et, layout("", xk, "predicted / actual − 1 (%)", { xaxis: { type: "log", title: { text: xk } },
      margin: { l: 60, r: 20, t: 10, b: 44 } }));
  }
  if (fc.length) {
    const fx = fc.map((f) => f.at_step);
    const ftr = [{ x: fx, y: fc.map((f) => f.predicted_final), mode: "lines+markers", name: "forecast of final loss",
      error_y: { type: "data", symmetric: false, array: fc.map((f) => (f.upper ?? f.predicted_final) - f.predicted_final),
        arrayminus: fc.map((f) => f.predicted_final - (f.lower ?? f.predicted_final)) }, line: { color: "#1f77b4" },
      text: fc.map((f) => (f.centre_rule ? "centre: " + f.centre_rule : "")) }];
    if (typeof pr.predicted_final_loss === "number") ftr.push({ x: [fx[0], fx[fx.length - 1]], y: [pr.predicted_final_loss, pr.predicted_final_loss],
      mode: "lines", name: "prediction before the hero", line: { color: "#d62728", dash: "dash" } });
    const moved = alertsOf.filter((e) => e.kind !== "band_exit" && typeof e.step === "number");
    if (moved.length) ftr.push({ x: moved.map((e) => e.step), y: moved.map((e) => e.predicted_final ?? fc[fc.length - 1].predicted_final),
      mode: "markers", name: "alerts", marker: { symbol: "triangle-up", size: 12, color: "#ff7f0e" }, text: moved.map((e) => e.message) });
    const fLay = layout("", "hero step of the forecast", "predicted final loss");
    fLay.shapes = changes.map((c) => ({ type: "line", xref: "x", yref: "paper", x0: c.step, x1: c.step, y0: 0, y1: 1,
      line: { color: "#ff7f0e", dash: "dash", width: 1.5 } }));
    plot("c-forecasts", ftr, fLay);
  } else {
    document.getElementById("c-forecasts").outerHTML = empty("no forecast snapshots yet");
  }
  const snaps = d.snapshots || [];
  if (snaps.length) {
    const st = snaps.map((s, i) => {
      const [sx, sy] = xy(s, xk in s ? xk : "step", "loss");
      const t = snaps.length > 1 ? i / (snaps.length - 1) : 1;
      return { x: sx, y: sy, mode: "lines", name: "at step " + s.at_step,
        line: { color: `rgba(31,119,180,${0.25 + 0.75 * t})`, width: 1.2 } };
    });
    if (ay.length) st.push({ x: ax, y: ay, mode: "lines", name: "actual", line: { color: "#1d232b", width: 1 } });
    plot("c-snapshots", st, layout("", xk, "loss", { xaxis: { type: "log", title: { text: xk } } }));
  } else {
    document.getElementById("c-snapshots").outerHTML = empty("no forecast snapshots yet");
  }
};

RENDER.tables = async function (d) {
  const main = document.getElementById("main");
  const rows = (d.tables || []).map((t) => `<tr><td>${esc(t.name)}</td><td>${esc(t.title)}</td><td>${csvLink(t.name, t.name + ".csv")}</td></tr>`).join("");
  main.innerHTML = card("Every table as CSV", `<table><thead><tr><th>table</th><th>what</th><th>download</th></tr></thead><tbody>${rows}</tbody></table>`);
};

// ---------------------------------------------------------------------------------------------
// start

document.getElementById("ladder").addEventListener("change", (e) => go(e.target.value, state.page));
window.addEventListener("hashchange", () => refresh(false));
document.getElementById("live").addEventListener("change", () => refresh(false));
window.addEventListener("DOMContentLoaded", async () => {
  if (typeof Plotly === "undefined") { recordError("plotly.js did not load"); return; }
  await refresh(true);
  schedule();
});
