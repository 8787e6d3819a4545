"""`ladder compare A B`: two ladders' laws and hero predictions side by side, and the effect of B (the
changed recipe) against A: per size, its trend with scale, carried to the hero with a band, backtested,
and a verdict (ladder.analysis.effect, fits.effect_trend). Reads what the steps wrote and runs nothing; saves
its result under B's ladder folder for the dashboard (<root>/<B>/compare/<A>.json).
"""

from __future__ import annotations

import json

import click

from ladder.cli.options import example, json_option, level_option, root_option, table_width


def summarise(spec) -> dict:
    """What a comparison shows of one ladder: its law, backtest and hero prediction (None where a
    step has not run yet)."""
    from ladder.dag import queries
    from ladder.executor.store import Store
    from ladder.outputs import layout

    store = Store(spec.root)
    dirs = {name: store.to_path(path) for name, path in queries.step_dirs(spec).items()}

    def read(step: str, name: str) -> dict:
        return (store.read_json(store.join(dirs[step], name)) or {}) if step in dirs else {}

    fit, pred = read("fit", layout.FIT), read("predict", layout.PREDICTION)
    summary, backtest, hero = fit.get("summary") or {}, fit.get("backtest") or {}, pred.get("hero") or {}
    actual = read(spec.hero.name, layout.RESULT).get("final_eval_loss") if spec.hero is not None else None
    return {
        "ladder": spec.name, "root": spec.root, "rungs": len(spec.rungs),
        "law": summary.get("law"), "params": summary.get("params") or {}, "level": summary.get("level"),
        "fit_on": summary.get("fit_on"),
        "backtest_error": backtest.get("relative_error"), "backtest_ratio": backtest.get("compute_ratio"),
        "hero_flops": hero.get("flops"), "hero_ratio": hero.get("compute_ratio"),
        "predicted_final_loss": hero.get("predicted_final_loss"), "lower": hero.get("lower"),
        "upper": hero.get("upper"), "actual_final_loss": actual,
    }


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def _band(v: float, lo: float, hi: float, spec: str) -> str:
    return f"{v:{spec}} [{lo:{spec}}, {hi:{spec}}]"


def _html_target(path: str | None):
    """The --html file's path, checked before anything is analysed (its folder must exist)."""
    from pathlib import Path

    from ladder.cli.common import UserError

    if path is None:
        return None
    out = Path(path)
    if not out.parent.is_dir():
        raise UserError(f"--html {path}: folder {out.parent} does not exist; create it or give another path")
    if out.is_dir():
        raise UserError(f"--html {path}: is a folder; give a file name, e.g. {out / 'compare.html'}")
    return out


@click.command("compare", epilog=example(
    "ladder compare experiments/tiny.py experiments/tiny.py --variant-b dense --root runs",
    "ladder compare experiments/tiny.py experiments/tiny.py --variant-b dense --html compare.html --json",
    "ladder compare experiments/tiny.py experiments/smoke.py --root runs",
))
@click.argument("spec_a", metavar="SPEC_A", type=click.Path(dir_okay=False))
@click.argument("spec_b", metavar="SPEC_B", type=click.Path(dir_okay=False))
@root_option
@click.option("--set-a", "set_a", multiple=True, metavar="KEY=VALUE", help="Override a field of SPEC_A.")
@click.option("--set-b", "set_b", multiple=True, metavar="KEY=VALUE", help="Override a field of SPEC_B.")
@click.option("--variant-a", default=None, metavar="NAME", help="A is SPEC_A's variant NAME (LadderSpec.variants).")
@click.option("--variant-b", default=None, metavar="NAME", help="B is SPEC_B's variant NAME (LadderSpec.variants).")
@level_option
@click.option("--draws", type=click.IntRange(min=20), default=200, show_default=True,
              help="Redraws of the seeds' luck behind every band.")
@click.option("--html", "html_path", default=None, type=click.Path(dir_okay=False),
              help="Also write the comparison page (offline plotly) to this file.")
@json_option
def compare(spec_a, spec_b, root, set_a, set_b, variant_a, variant_b, level, draws, html_path, as_json):
    """Does B's change still help at the hero's scale? Per shared size, B's loss minus A's and the
    compute-equivalent multiplier (the compute A's law needs to reach B's loss, over B's compute) with
    bands from the seeds; their trend with compute; both carried to the hero with a band; the largest
    size backtested from the smaller ones; a verdict. Both ladders must have finished their rungs. The result
    is saved under B's ladder folder (<root>/<B>/compare/<A>.json) for the dashboard's Compare page."""
    from ladder.analysis.effect import after_change, analyse_pair, save
    from ladder.cli.common import _spec

    out = _html_target(html_path)
    specs = [_spec(p, s, root, v) for p, s, v in ((spec_a, set_a, variant_a), (spec_b, set_b, variant_b))]
    a, b = (summarise(s) for s in specs)
    effect = analyse_pair(*specs, level=level, n_draws=draws)
    effect["after_change"] = after_change(*specs, a, effect)
    verdict = effect.pop("verdict")
    if out is not None:
        from ladder.report.compare_page import write_compare

        write_compare(out, a, b, effect, verdict)
    saved = save(*specs, {"a": a, "b": b, "effect": effect, "verdict": verdict})
    if as_json:
        click.echo(json.dumps({"a": a, "b": b, "effect": effect, "verdict": verdict,
                               "html": str(out) if out else None, "saved": saved}, default=str))
        return 0
    _print(a, b, effect, verdict, out)
    click.echo(f"saved: {saved} (the dashboard's Compare page of {b['ladder']})")
    return 0


def _print(a: dict, b: dict, effect: dict, verdict: str, out) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=table_width())
    table = Table(title=f"compare: {a['ladder']} (A) and {b['ladder']} (B)")
    for col in ("", "A", "B"):
        table.add_column(col, overflow="fold")
    for k in ("ladder", "root", "rungs", "law", "fit_on", "backtest_error", "backtest_ratio", "hero_flops", "hero_ratio",
              "predicted_final_loss", "lower", "upper", "level", "actual_final_loss"):
        table.add_row(k, _fmt(a[k]), _fmt(b[k]))
    for k in sorted(set(a["params"]) | set(b["params"])):
        table.add_row(f"param {k}", _fmt(a["params"].get(k)), _fmt(b["params"].get(k)))
    console.print(table)
    level = f"{effect['level']:.0%}"
    sizes = Table(title=f"effect of B per size ({level} bands; {effect['noise']['text']})")
    for col in ("size", "FLOPs (B)", "loss A", "loss B", "delta (B - A)", "multiplier", "pairs"):
        sizes.add_column(col, overflow="fold")
    for r in effect["per_size"]:
        sizes.add_row(r["size"], f"{r['flops_b']:.3g}", f"{r['loss_a']:.4f}", f"{r['loss_b']:.4f}",
                      _band(r["delta"], r["delta_lower"], r["delta_upper"], "+.4f"),
                      _band(r["multiplier"], r["lower"], r["upper"], ".3f") + ("  (capped)" if r["capped"] else ""),
                      str(r["pairs"]))
    console.print(sizes)
    t = effect["trend"]
    click.echo(f"trend: log multiplier {t['log_multiplier_per_decade']:+.3f} per decade of compute "
               f"[{t['lower']:+.3f}, {t['upper']:+.3f}]: {t['verdict']} (B's {t['direction']}, "
               f"{t['mean_multiplier']:.3f}x on average)")
    h = effect["at_hero"]
    if h is not None:
        click.echo(f"at the hero ({h['flops']:.3g} FLOPs): {_band(h['multiplier'], h['lower'], h['upper'], '.3f')}x, "
                   f"delta {_band(h['delta'], h['delta_lower'], h['delta_upper'], '+.4f')}; one pair of heroes "
                   f"(its own seed luck too): [{h['pair_lower']:.3f}, {h['pair_upper']:.3f}]x, "
                   f"delta [{h['pair_delta_lower']:+.4f}, {h['pair_delta_upper']:+.4f}]")
    bt = effect["backtest"]
    if bt["ok"]:
        p = bt["predicted"]
        click.echo(f"backtest: {bt['size']} predicted from {', '.join(bt['fit_on'])}: "
                   f"{_band(p['multiplier'], p['lower'], p['upper'], '.3f')}x, measured {bt['measured']['multiplier']:.3f}x "
                   f"({'inside' if bt['inside'] else 'OUTSIDE'} the band with that size's own luck, "
                   f"[{p['pair_lower']:.3f}, {p['pair_upper']:.3f}]); delta predicted {p['delta']:+.4f}, "
                   f"measured {bt['measured']['delta']:+.4f}")
    else:
        click.echo(f"backtest: not run ({bt['reason']})")
    heroes = effect["heroes"]
    if heroes is not None:
        inside = "" if "inside" not in heroes else f" ({'inside' if heroes['inside'] else 'OUTSIDE'} the pair band)"
        click.echo(f"heroes: A {heroes['loss_a']:.4f}, B {heroes['loss_b']:.4f}: delta {heroes['delta']:+.4f}, "
                   f"{heroes['multiplier']:.3f}x measured{inside}")
    change = effect["after_change"]
    if change is not None and change["ok"]:
        line = (f"A's hero past its mix switch at {change['frac']:.0%}: forecast {change['predicted_final_loss']:.4f} "
                f"[{_fmt(change['lower'])}, {_fmt(change['upper'])}] (the switch's effect from B's rungs"
                + ("" if change["replayed_by_b"] else "; B does not replay this switch")
                + f"), centre kept {change['unchanged_centre']:.4f}")
        if change.get("actual_final_loss") is not None:
            line += (f"; actual {change['actual_final_loss']:.4f}: error {change['relative_error']:+.2%} "
                     f"against {change['unchanged_relative_error']:+.2%} with the centre kept")
        click.echo(line)
    elif change is not None:
        click.echo(f"A's hero past its mix switch: not forecast ({change['reason']})")
    click.echo(f"verdict: {verdict}")
    if out is not None:
        click.echo(f"page: {out}")
