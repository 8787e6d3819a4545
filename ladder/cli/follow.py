"""`ladder follow`: watch a live hero, refresh its forecast as its eval points arrive, raise alerts."""

from __future__ import annotations

import datetime
import re
import time

import click

from ladder.cli.common import UserError, _spec, set_option, spec_argument, variant_option
from ladder.cli.options import example, root_option

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str) -> float:
    """'90', '90s', '10m', '2h', '3d' as seconds."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smhd]?)\s*", str(text))
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"{option} {text!r}: give a duration such as 90s, 10m, 2h or 3d")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_until(text: str | None, now: float) -> float | None:
    """A duration from now or an ISO time (UTC when no zone is given), as epoch seconds."""
    if text is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return now + parse_duration(text, "--until")
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


@click.command("follow", epilog=example(
    "ladder follow experiments/marin_moe_535b.py --hero marin-community/marin_moe/hero-12d8b6f0-dee637,hero-mix-996f4891-step108k",
    "ladder follow experiments/marin_moe_535b.py --from-csv hero.csv --metric eval_dropless/paloma/macro_loss --every 1m",
    "ladder follow experiments/tiny.py --from-jsonl runs/metrics.jsonl --on-alert 'notify-send \"$LADDER_ALERT_MESSAGE\"'",
))
@spec_argument
@click.option("--hero", "hero_runs", default=None, metavar="ENTITY/PROJECT/RUN[,RUN...]",
              help="The hero's W&B run ids, in order (a run resumed under a new id): stitched by step.")
@click.option("--from-csv", "from_csv", default=None, metavar="FILE", help="An exported history CSV, re-read each poll.")
@click.option("--from-jsonl", "from_jsonl", default=None, metavar="PATH_OR_URL",
              help="A JSONL metrics file (a path or a URL), re-read each poll as it grows.")
@click.option("--metric", default=None, metavar="KEY", help="The eval loss key (default: eval/loss, eval_loss, eval/lm_loss).")
@click.option("--every", "every", default="10m", show_default=True, help="Time between polls (90s, 10m, 1h).")
@click.option("--until", "until", default=None, help="Stop after this long (2h, 3d) or at this ISO time; "
              "without it follow stops when the hero reaches its last step.")
@click.option("--max-polls", type=click.IntRange(min=1), default=None, help="Stop after this many polls (1: poll once).")
@click.option("--alert-move", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Alert when the forecast of the final moves by more than this fraction since the last such alert "
                   "(default: a third of the band's half-width).")
@click.option("--stall", type=click.IntRange(min=1), default=3, show_default=True,
              help="Alert when this many polls in a row bring no new point.")
@click.option("--on-alert", "on_alert", default=None, metavar="CMD",
              help="A shell command run on each alert: its fields as LADDER_ALERT_<FIELD> in the environment and "
                   "as JSON on stdin.")
@click.option("--timeout", "timeout", default="30s", show_default=True,
              help="With --hero: how long each W&B API request may take before the poll fails (wandb retries a "
                   "refused connection until then).")
@click.option("--retry", is_flag=True, help="Retry a source that fails on the first poll (later failures always are).")
@root_option
@set_option
@variant_option
def follow(spec_path, hero_runs, from_csv, from_jsonl, metric, every, until, max_polls, alert_move, stall, on_alert,
           timeout, retry, root, overrides, variant):
    """Follow a hero as it trains: each poll imports its new eval points, refreshes the forecast snapshots
    and the dashboard's data (<root>/<ladder>/follow/), and raises alerts (events.jsonl, --on-alert).

    Needs the rungs-only forecast first (`ladder submit SPEC`). A restart carries on where the last
    poll left off.
    """
    from ladder.analysis.follow import FollowConfig, Follower, follow_dir
    from ladder.analysis.follow_forecast import NoForecast, load_context
    from ladder.analysis.follow_source import Source, check
    from ladder.dag import queries
    from ladder.imports.wandb_run import InputError

    given = [(k, v) for k, v in (("wandb", hero_runs), ("csv", from_csv), ("jsonl", from_jsonl)) if v]
    if len(given) != 1:
        raise UserError("give one source: --hero ENTITY/PROJECT/RUN[,RUN...], --from-csv FILE or --from-jsonl PATH_OR_URL")
    spec = _spec(spec_path, overrides, root, variant)
    if spec.hero is None:
        raise UserError(f"{spec_path}: the ladder has no hero to follow; declare LadderSpec(hero=...)")
    if "://" in spec.root:
        raise UserError(f"--root {spec.root}: follow writes to a local ladder root")
    source = Source(kind=given[0][0], where=given[0][1], metric=metric, timeout_s=parse_duration(timeout, "--timeout"))
    config = FollowConfig(every_s=parse_duration(every, "--every"), until=parse_until(until, time.time()),
                          max_polls=max_polls, alert_move=alert_move, stall=stall, on_alert=on_alert, retry=retry)
    try:
        check(source)
        dirs = queries.step_dirs(spec)
        ctx = load_context(dirs.get("fit"), dirs.get("predict"), spec.hero.steps, spec.hero.batch_tokens,
                           {k: v for k, v in dirs.items() if "://" not in v}, [r.name for r in spec.rungs])
    except (InputError, NoForecast) as exc:
        raise UserError(str(exc)) from None
    if variant is None:  # a variant's own variants are not declared: only the base ladder's hero is carried so
        ctx = _with_change_effects(ctx, spec, lambda name: _spec(spec_path, overrides, root, name))
    follower = Follower(follow_dir(spec.root, spec.name), ctx, source, tuple(spec.hero.changes), config, say=click.echo,
                        envelopes=_envelopes(dirs, spec))
    if follower.state.get("done"):
        click.echo(f"follow: the hero already reached its last step ({follower.state['last_step']}); nothing to do")
        return 0
    return loop(follower, config)


def _with_change_effects(ctx, spec, load):
    """The context with the effects of the hero's declared switches measured on rungs that replay them
    (ladder.analysis.change_effect), each said in one line."""
    import dataclasses

    from ladder.analysis.change_effect import carried_effects

    effects = carried_effects(spec, load, ctx.level)
    for e in effects:
        head = f"follow: the change at step {e['step']} ({e['what']}), replayed by --variant {e['variant']}: "
        click.echo(head + (f"its measured effect is carried past it, {e['text']}" if e["ok"] else
                           f"not carried ({e['reason']}); past it the band widens instead"))
    return dataclasses.replace(ctx, change_effects=effects)


def _envelopes(dirs: dict[str, str], spec) -> dict:
    """The rungs' training-metric envelopes at the hero's size (rungs trained here; none for imported rungs)."""
    from ladder.analysis.dynamics import METRICS, envelope, rung_frames

    local = {k: v for k, v in dirs.items() if "://" not in v}
    rungs = rung_frames(local, [r.name for r in spec.rungs])
    if len(rungs) < 3:
        return {}
    envs = {m: envelope(rungs, float(spec.hero.model.params_active), m, spec.fit.level) for m in METRICS}
    return {m: e for m, e in envs.items() if not e.empty}


def loop(follower, config) -> int:
    from ladder.analysis.follow_source import SourceUnavailable
    from ladder.imports.wandb_run import InputError

    polls, failures = 0, 0
    while True:
        try:
            events = follower.poll()
        except InputError as exc:
            raise UserError(str(exc)) from None
        except SourceUnavailable as exc:
            if follower.state["polls"] == 0 and not config.retry:
                raise UserError(f"{exc} (pass --retry to keep trying)") from None
            failures += 1
            delay = min(config.every_s, 2.0 ** failures)
            click.echo(f"poll failed ({exc}); retrying in {delay:.0f}s")
            if _past(config):
                return 0
            time.sleep(delay)
            continue
        failures, polls = 0, polls + 1
        click.echo(_line(follower.state, events))
        if follower.state.get("done"):
            click.echo(f"follow: the hero reached its last step ({follower.state['last_step']}); done")
            return 0
        if (config.max_polls is not None and polls >= config.max_polls) or _past(config):
            return 0
        time.sleep(config.every_s)


def _past(config) -> bool:
    return config.until is not None and time.time() + config.every_s > config.until


def _line(state: dict, events: list[dict]) -> str:
    snap = state["snapshots"][-1] if state["snapshots"] else None
    head = f"poll {state['polls']}: last step {state['last_step']}"
    if snap is not None:
        head += f"; final {snap['predicted_final']:.4f} [{snap['lower']:.4f}, {snap['upper']:.4f}] (snapshot at step {snap['at_step']})"
    return "\n".join([head] + [f"  {'ALERT' if e.get('alert') else 'mark'} {e['kind']}: {e['message']}" for e in events])


