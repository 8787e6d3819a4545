/* scaling-ladder dashboard: the MoE health page (RENDER.moe), loaded after app.js and drawn with its helpers.
 * On the hero, the training-dynamics envelopes (ladder.analysis.dynamics: per tenth of the run, from the
 * rungs, at the hero's size, as report.html draws them) lie under the matching charts on the hero's step axis
 * (fraction x its total steps), with its steps outside them marked. */
"use strict";

// chart -> the metric its envelope is of (the router-bias chart: the RMS over layers, drawn beside them)
const ENVELOPE_OF = { "c-bias": "router_bias_norm", "c-expert_load_max_over_mean": "expert_load_max_over_mean",
  "c-drop_rate": "drop_rate", "c-grad_norm": "grad_norm" };

function envelopeTraces(dyn, metric) {
  const m = dyn && dyn.metrics && dyn.metrics[metric];
  if (!m || !(m.envelope || []).length) return [];
  const total = dyn.total_steps;
  const name = `envelope (${Math.round(100 * dyn.level)}%${m.upper_only ? ", upper bound" : ""})`;
  const segs = [];  // runs of adjacent tenths (a tenth fewer than 3 rungs reached is a gap)
  for (const e of [...m.envelope].sort((a, b) => a.frac_lo - b.frac_lo)) {
    const last = segs.length ? segs[segs.length - 1] : null;
    if (last && Math.abs(last[last.length - 1].frac_hi - e.frac_lo) < 1e-9) last.push(e); else segs.push([e]);
  }
  const held = (seg, key) => seg.flatMap((e) => [e[key], e[key]]);  // each tenth's value flat across it
  const traces = [];
  segs.forEach((seg, k) => {
    const x = seg.flatMap((e) => [e.frac_lo * total, e.frac_hi * total]);
    traces.push({ x, y: held(seg, "lower"), mode: "lines", line: { width: 0, color: "#2ca02c" }, hoverinfo: "skip",
      showlegend: false, legendgroup: "env", name: name + " lower edge" });
    traces.push({ x, y: held(seg, "upper"), mode: "lines", line: { width: 0.8, color: "#2ca02c" }, fill: "tonexty",
      fillcolor: "rgba(44,160,44,0.18)", legendgroup: "env", showlegend: k === 0, name });
    traces.push({ x, y: held(seg, "centre"), mode: "lines", line: { color: "#2ca02c", dash: "dash", width: 1.2 },
      legendgroup: "centre", showlegend: k === 0, name: "envelope centre" });
  });
  return traces;
}

function outsideTrace(dyn, metric) {
  const m = dyn && dyn.metrics && dyn.metrics[metric];
  const o = (m && m.outside) || {};
  if (!(o.step || []).length) return [];
  const n = Math.round(m.points * (1 - m.inside));
  return [{ x: o.step, y: o.value, mode: "markers", name: `outside the envelope (${n} of ${m.points} steps)`,
    marker: { symbol: "x-thin-open", size: 9, color: "#ff00aa", line: { width: 2 } } }];
}

function envelopeSummary(dyn) {
  const parts = Object.entries((dyn && dyn.metrics) || {}).filter(([, m]) => typeof m.inside === "number")
    .map(([k, m]) => `${esc(k)} ${Math.round(100 * m.inside)}% of ${m.points}`);
  return parts.length ? ` · steps inside the rungs' ${Math.round(100 * dyn.level)}% envelopes: ${parts.join(", ")}` : "";
}

RENDER.moe = function (d, changedPage) {
  const main = document.getElementById("main");
  const runs = (d.runs || []).filter((r) => r.series && r.series.n);
  if (!runs.length) { main.innerHTML = card("MoE health", empty("no training metrics yet")); return; }
  const names = runs.map((r) => r.name);
  if (!names.includes(state.moeRun)) state.moeRun = names.includes("hero") ? "hero" : names[names.length - 1];
  const r = runs.find((x) => x.name === state.moeRun);
  const dyn = d.dynamics && d.dynamics.hero === r.name ? d.dynamics : null;
  const opts = names.map((n) => `<option ${n === state.moeRun ? "selected" : ""}>${esc(n)}</option>`).join("");
  const charts = [["c-bias", "Router-bias norm per layer"], ["c-expert_load_max_over_mean", "Expert load: max / mean"],
    ["c-drop_rate", "Token drop rate"], ["c-routing_entropy", "Routing entropy"], ["c-grad_norm", "Gradient norm"], ["c-loss", "Train loss"]];
  main.innerHTML = `<div class="controls">run <select id="moe-run">${opts}</select>
      ${csvLink("metrics." + r.name, "metrics.csv")} ${csvLink("events." + r.name, "events.csv")}
      <span class="muted"> · ${(r.events || []).length} spike events recorded (marked ×, dotted lines)${envelopeSummary(dyn)}</span></div>
    <div class="grid2">${charts.map(([id, t]) => card(t, `<div id="${id}" class="chart short"></div>`)).join("")}</div>` +
    ((r.events || []).length ? card("Spike events", table(r.events.slice(0, 300))) : "");
  document.getElementById("moe-run").addEventListener("change", (e) => { state.moeRun = e.target.value; state.last = ""; refresh(true); });
  const s = r.series, ev = r.events || [];
  const shapes = ev.filter((e) => typeof e.step === "number").slice(0, 100).map((e) => ({ type: "line", xref: "x", yref: "paper",
    x0: e.step, x1: e.step, y0: 0, y1: 1, line: { color: "rgba(214,39,40,0.45)", width: 1, dash: "dot" } }));
  function withEvents(traces, key) {
    const steps = s.step || [];
    const mk = ev.filter((e) => (!e.metric || e.metric === key || key === "loss" && e.metric === "loss") && typeof e.step === "number");
    const xs = [], ys = [], txt = [];
    for (const e of mk) {
      let j = 0, best = Infinity;
      for (let i = 0; i < steps.length; i++) { const dd = Math.abs(steps[i] - e.step); if (dd < best) { best = dd; j = i; } }
      const y = (s[key] || [])[j];
      if (y !== null && y !== undefined && (e.metric === key || !e.metric)) { xs.push(e.step); ys.push(y); txt.push(`${e.event || e.kind || "spike"} ${e.metric || ""} size ${fmt(e.size)}`); }
    }
    if (xs.length) traces.push({ x: xs, y: ys, mode: "markers", name: "spikes", text: txt, marker: { symbol: "x", size: 9, color: "#d62728" } });
    return traces;
  }
  // a two-sided envelope spans decades (early grad norms): on a log axis, as in report.html
  const lay = (yt, metric) => layout("", "step", yt, { shapes, margin: { l: 55, r: 10, t: 10, b: 40 },
    ...(dyn && metric && dyn.metrics[metric] && !dyn.metrics[metric].upper_only ? { yaxis: { title: { text: yt }, type: "log", zeroline: false } } : {}) });
  const bias = (r.bias_keys || []).map((k, i) => { const [x, y] = xy(s, "step", k); return { x, y, mode: "lines", name: "layer " + k.slice(18), line: { color: color(i), width: 1.2 } }; });
  if (bias.length) {
    const evB = ev.filter((e) => typeof e.step === "number" && String(e.metric || "").startsWith("router_bias_norm"));
    if (evB.length) bias.push({ x: evB.map((e) => e.step), y: evB.map((e) => { const st = s.step || []; let j = 0; for (let i = 0; i < st.length; i++) if (Math.abs(st[i] - e.step) < Math.abs(st[j] - e.step)) j = i;
        const keys = e.metric in s ? [e.metric] : r.bias_keys; return Math.max(...keys.map((k) => (s[k] || [])[j] ?? -Infinity)); }),
      mode: "markers", name: "spikes", marker: { symbol: "x", size: 9, color: "#d62728" } });
    const env = envelopeTraces(dyn, ENVELOPE_OF["c-bias"]);
    if (env.length) {  // the envelope is of the RMS over layers (ladder/analysis/dynamics.py): draw that RMS too
      const norm = (s.step || []).map((_, i) => Math.sqrt(r.bias_keys.reduce((a, k) => a + ((s[k] || [])[i] ?? NaN) ** 2, 0) / r.bias_keys.length));
      const keep = norm.map((v, i) => (isFinite(v) ? i : -1)).filter((i) => i >= 0);
      bias.push({ x: keep.map((i) => s.step[i]), y: keep.map((i) => norm[i]), mode: "lines", name: "RMS over layers",
        line: { color: "#1d232b", width: 1.6 } });
    }
    plot("c-bias", [...env, ...bias, ...outsideTrace(dyn, ENVELOPE_OF["c-bias"])], lay("‖router bias‖", ENVELOPE_OF["c-bias"]));
  } else document.getElementById("c-bias").outerHTML = empty("no router-bias metrics (dense model, or aux-loss balancing)");
  for (const key of ["expert_load_max_over_mean", "drop_rate", "routing_entropy", "grad_norm", "loss"]) {
    const [x, y] = xy(s, "step", key);
    if (!y.length) { document.getElementById("c-" + key).outerHTML = empty("not logged by this run"); continue; }
    const traces = withEvents([{ x, y, mode: "lines", name: key, line: { color: "#1f4e79", width: 1.2 } }], key);
    const metric = ENVELOPE_OF["c-" + key];
    plot("c-" + key, metric ? [...envelopeTraces(dyn, metric), ...traces, ...outsideTrace(dyn, metric)] : traces, lay(key, metric));
  }
};
