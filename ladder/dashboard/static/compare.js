/* scaling-ladder dashboard: the Compare page (RENDER.compare), loaded after app.js and drawn with its helpers.
 * One ladder's comparisons as B (`ladder compare A <this ladder>` saves each under its folder): the verdict,
 * the per-size effect with its bands and the trend out to the hero (the comparison page's own figures,
 * ladder.report.compare_figures), the hero's predicted effect beside the heroes' actual difference, the backtest. */
"use strict";

function bandText(v, lo, hi, digits = 4) {
  return typeof v === "number" ? `${fmt(v, digits)} [${fmt(lo, digits)}, ${fmt(hi, digits)}]` : "";
}

RENDER.compare = function (d) {
  const main = document.getElementById("main");
  const all = d.comparisons || [];
  if (!all.length) {
    main.innerHTML = card("Compare", empty("No comparison with this ladder as B yet: `ladder compare SPEC_A SPEC_B " +
      "--root <this root>` saves one under B's folder (e.g. --variant-b dense for tiny+dense)."));
    return;
  }
  const names = all.map((c) => c.against);
  if (!names.includes(state.compareWith)) state.compareWith = names[0];
  const c = all.find((x) => x.against === state.compareWith);
  const opts = names.map((n) => `<option ${n === state.compareWith ? "selected" : ""}>${esc(n)}</option>`).join("");
  const head = `<div class="controls">against (A) <select id="compare-with">${opts}</select>
    <span class="muted"> · ${esc(d.ladder)} is B${c.saved_at ? " · saved " + esc(when(c.saved_at)) : ""}</span></div>`;
  if (c.error) {
    main.innerHTML = head + card("Compare", empty(c.error));
  } else {
    const t = c.trend || {}, level = Math.round(100 * (c.level || 0.9));
    const summary = `<p><b>${esc(c.verdict)}</b></p><p class="muted">${level}% bands; ${esc((c.noise || {}).text)}; ` +
      `trend: log multiplier ${fmt(t.log_multiplier_per_decade, 3)} per decade [${fmt(t.lower, 3)}, ${fmt(t.upper, 3)}] ` +
      `(${esc(t.verdict)})</p>`;
    const sizes = (c.per_size || []).map((r) => ({ size: r.size, "FLOPs (B)": r.flops_b, "loss A": r.loss_a,
      "loss B": r.loss_b, "delta (B - A)": bandText(r.delta, r.delta_lower, r.delta_upper),
      multiplier: bandText(r.multiplier, r.lower, r.upper, 3), pairs: r.pairs }));
    const rows = [];
    const h = c.at_hero, heroes = c.heroes, bt = c.backtest || {};
    if (h) rows.push({ what: "at the hero (predicted)", FLOPs: h.flops, multiplier: bandText(h.multiplier, h.lower, h.upper, 3),
      delta: bandText(h.delta, h.delta_lower, h.delta_upper), "one pair's band": bandText(h.multiplier, h.pair_lower, h.pair_upper, 3) });
    if (heroes) rows.push({ what: "heroes (actual)", FLOPs: heroes.flops_b, multiplier: fmt(heroes.multiplier, 3),
      delta: fmt(heroes.delta), "one pair's band": heroes.inside === undefined ? "" : (heroes.inside ? "inside" : "OUTSIDE") });
    if (bt.ok) {
      const p = bt.predicted;
      rows.push({ what: `backtest: ${bt.size} predicted from ${(bt.fit_on || []).join(", ")}`, FLOPs: p.flops,
        multiplier: bandText(p.multiplier, p.lower, p.upper, 3), delta: fmt(p.delta), "one pair's band": bandText(p.multiplier, p.pair_lower, p.pair_upper, 3) });
      rows.push({ what: `backtest: ${bt.size} measured`, FLOPs: p.flops, multiplier: fmt(bt.measured.multiplier, 3),
        delta: fmt(bt.measured.delta), "one pair's band": bt.inside ? "inside" : "OUTSIDE" });
    }
    const ch = c.after_change;
    const change = ch && ch.ok ? card("A's hero past its mix switch", `<p>forecast ${fmt(ch.predicted_final_loss)} ` +
      `[${fmt(ch.lower)}, ${fmt(ch.upper)}] with the switch's effect from B's rungs; the centre kept: ${fmt(ch.unchanged_centre)}` +
      (typeof ch.actual_final_loss === "number" ? `; actual ${fmt(ch.actual_final_loss)}` : "") + "</p>") : "";
    main.innerHTML = head + card(`${esc((c.b || {}).ladder || d.ladder)} (B) against ${esc(c.against)} (A)`, summary) +
      card("Compute-equivalent multiplier per size, its trend and the hero", '<div id="c-cmp-mult" class="chart tall"></div>') +
      card("Loss difference per size and at the hero", '<div id="c-cmp-delta" class="chart tall"></div>') +
      card("Per size", table(sizes)) + (rows.length ? card("At the hero, and the backtest", table(rows)) : "") + change;
    for (const [id, key] of [["c-cmp-mult", "mult"], ["c-cmp-delta", "delta"]]) {
      const f = (c.figures || {})[key];
      if (!f) continue;
      const lay = Object.assign({}, f.layout, { uirevision: state.ladder + state.page + c.against });
      delete lay.height;  // the page's own chart height, not the offline page's
      plot(id, f.data, lay);
    }
  }
  document.getElementById("compare-with").addEventListener("change", (e) => {
    state.compareWith = e.target.value; state.last = ""; refresh(true);
  });
};
