"""Mirror a ladder into Weights & Biases: a trainer callback per training step, and a ladder-level run.

Our metrics files are the source of truth; W&B is a mirror, so a W&B failure is reported once as
a warning and never stops training.

- Mode, files and run ids: ladder.wandb.env (``auto`` is online with an API key, else
  offline; W&B's folders under ``<root>/<ladder>/wandb``; a resumed step continues its run).
- Entity and project: the spec's WandbSpec, else WANDB_ENTITY / WANDB_PROJECT, else project
  ``scaling-ladder``. Group = the ladder's name; run name = the step's name; config = the resolved
  spec as a dict (plus the step's own run spec under ``run``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ladder.wandb.env import (
    DEFAULT_PROJECT,
    _loggable,
    _plain,
    configure_env,
    resolve_mode,
    run_id,
    spec_config,
    teardown_bounded,
    wandb_dir,
)

__all__ = ["WandbCallback", "log_ladder_run", "log_ladder_step", "make_callback", "resolve_mode",
           "run_id", "training_callbacks"]


class WandbCallback:
    """Trainer callback: ``on_step(step, row)``, ``on_eval(step, row)``, ``on_checkpoint(step)``,
    ``on_end(result)``. W&B starts on the first call, in the process that trains (picklable
    until then, so it can be built in the driver and shipped to a Ray worker)."""

    def __init__(self, *, root: str | Path, ladder: str, step_name: str, config: dict | None = None,
                 mode: str = "offline", entity: str | None = None, project: str | None = None,
                 job_type: str = "train", salt: str = "", tags: tuple[str, ...] = (), notes: str = ""):
        self.root = str(root)
        self.ladder = ladder
        self.step_name = step_name
        self.config = config or {}
        self.mode = mode
        self.entity = entity
        self.project = project or DEFAULT_PROJECT
        self.job_type = job_type
        self.salt = salt
        self.tags = tuple(tags)
        self.notes = notes
        self._run = None
        self._failed = False
        self._last_step = -1

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_run"] = None
        return state

    @property
    def run(self):
        return self._run

    def _ensure(self):
        if self._run is not None or self._failed or self.mode == "disabled":
            return self._run
        try:
            import wandb

            base = configure_env(wandb_dir(self.root, self.ladder))
            self._run = wandb.init(
                project=self.project, entity=self.entity, group=self.ladder, name=self.step_name,
                job_type=self.job_type, config=self.config, dir=str(base), mode=self.mode,
                id=run_id(self.ladder, self.step_name, self.salt), resume="allow", reinit="create_new",
                tags=list(self.tags) or None, notes=self.notes or None,
                settings=wandb.Settings(console="off", silent=True, x_disable_stats=True, save_code=False),
            )
        except Exception as exc:  # W&B is a mirror: warn once, keep training
            self._fail(exc)
        return self._run

    def _fail(self, exc: BaseException) -> None:
        if not self._failed:
            print(f"warning: W&B logging for {self.ladder}/{self.step_name} is off ({type(exc).__name__}: "
                  f"{str(exc).splitlines()[0] if str(exc) else ''}); the metrics files are unaffected",
                  file=sys.stderr)
        self._failed = True
        self._run = None

    def _log(self, data: dict, step: int | None) -> None:
        run = self._ensure()
        if run is None:
            return
        data = {k: v for k, v in data.items() if _loggable(v) and k != "step"}
        if not data:
            return
        try:
            if step is None or step < self._last_step:
                run.log(data, step=max(self._last_step, 0))
            else:
                run.log(data, step=int(step))
                self._last_step = int(step)
        except Exception as exc:
            self._fail(exc)

    def on_step(self, step: int, row: dict) -> None:
        self._log({f"train/{k}" if k in ("loss", "lr") else k: v for k, v in row.items()}, step)

    def on_eval(self, step: int, row: dict) -> None:
        self._log({(k if k.startswith(("eval", "bpb", "task_")) else f"eval/{k}"): v for k, v in row.items()
                   if k not in ("tokens", "flops")}, step)

    def on_checkpoint(self, step: int) -> None:
        run = self._ensure()
        if run is not None:
            try:
                run.summary["last_checkpoint_step"] = int(step)
            except Exception as exc:
                self._fail(exc)

    def on_end(self, result: dict | None = None) -> None:
        run = self._run
        if run is None:
            return
        try:
            for k, v in (result or {}).items():
                if _loggable(v) or isinstance(v, str):
                    run.summary[k] = v
            status = (result or {}).get("status", "SUCCESS")
            run_dir = str(Path(run.dir).parent)
            run.finish(exit_code=0 if status == "SUCCESS" else 1)
            _close_service(run_dir)
        except Exception as exc:
            self._fail(exc)
        finally:
            self._run = None

    def finish(self) -> None:
        self.on_end({})


# A wandb-core still running this long after run.finish() returned is killed, so a service that never
# exits cannot hold a finished rung's worker (and the ladder) for ever. Its teardown normally takes
# well under a second; what it had not written yet is in the run's directory for `wandb sync`.
FINISHED_TEARDOWN_S = 120.0


def _close_service(run_dir: str) -> None:
    """Shut this process's wandb service connection now that its run is finished.

    Left open, wandb closes it in an atexit hook; a Ray worker's service is often gone by then, and
    every demo printed wandb's "Exception ignored in atexit callback ... Connection lost" traceback.
    A later run in the same process starts a new service.
    """
    import wandb

    if teardown_bounded(wandb, FINISHED_TEARDOWN_S):
        print(f"warning: wandb's service had not exited {FINISHED_TEARDOWN_S:.0f} s after the run finished; stopped it "
              f"(the metrics files are complete; `wandb sync {run_dir}` uploads anything the W&B run lacks)", file=sys.stderr)


def make_callback(spec: Any, step_name: str, root: str | Path | None = None, mode: str | None = None,
                  salt: str = "") -> WandbCallback | None:
    """The callback for one training step of ``spec`` (None when W&B is disabled).

    ``mode``: the command line's --wandb (None: WANDB_MODE, then the spec's). ``salt``: e.g. the
    step's content hash, so a changed config is a new W&B run and a resumed one is the same run."""
    wb = getattr(spec, "wandb", None)
    resolved = resolve_mode(mode, getattr(wb, "mode", None))
    if resolved == "disabled":
        return None
    return WandbCallback(
        root=root or spec.root, ladder=spec.name, step_name=step_name, config=spec_config(spec, step_name),
        mode=resolved, entity=getattr(wb, "entity", None) or os.environ.get("WANDB_ENTITY"),
        project=getattr(wb, "project", None) or os.environ.get("WANDB_PROJECT"), salt=salt,
        tags=tuple(getattr(wb, "tags", ()) or ()), notes=getattr(wb, "notes", "") or "",
    )


def log_ladder_run(root: str | Path, ladder: str, spec: Any = None, mode: str | None = None,
                   entity: str | None = None, project: str | None = None, tags: tuple[str, ...] = (),
                   notes: str = "") -> str | None:
    """Log the ladder-level run: fit, predict and report tables (and a loss-vs-compute plot).

    Reads whatever the fit/predict/gate/report steps have written under ``<root>/<ladder>``; call it
    after any of them (the run id is fixed per ladder, so calls resume one run). Returns the run's
    directory, or None when disabled or W&B failed."""
    wb = getattr(spec, "wandb", None)
    resolved = resolve_mode(mode, getattr(wb, "mode", None))
    if resolved == "disabled":
        return None
    from ladder.dashboard.data import Root
    from ladder.outputs import layout

    r = Root(root)
    dirs = r.step_dirs(ladder)
    try:
        import wandb

        base = configure_env(wandb_dir(root, ladder))
        run = wandb.init(
            project=project or getattr(wb, "project", None) or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
            entity=entity or getattr(wb, "entity", None) or os.environ.get("WANDB_ENTITY"),
            group=ladder, name=f"{ladder}-ladder", job_type="ladder", dir=str(base), mode=resolved,
            config=spec_config(spec) if spec is not None else {"ladder": ladder},
            id=run_id(ladder, "__ladder__"), resume="allow", reinit="create_new",
            tags=list(tags or getattr(wb, "tags", ()) or ()) or None, notes=notes or getattr(wb, "notes", "") or None,
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True, save_code=False),
        )
    except Exception as exc:
        print(f"warning: W&B ladder run for {ladder} is off ({type(exc).__name__}: {exc}); files unaffected",
              file=sys.stderr)
        return None
    try:
        tables: dict[str, list[dict]] = {}
        fit = r.fit(ladder)
        if fit["runs"]:
            tables["fit/runs"] = fit["runs"]
        if fit["params"]:
            tables["fit/params"] = fit["params"]
        if fit["backtest"]:
            tables["fit/backtest"] = fit["backtest"]
        if fit["curve"]:
            tables["fit/law_curve"] = fit["curve"]
        for name in ("hero_curve", "targets"):
            rows = r.table(ladder, name)
            if rows:
                tables[f"predict/{name}"] = rows
        if "hero" in dirs:
            rows = r.table(ladder, "forecasts")
            if rows:
                tables["hero/forecasts"] = rows
        payload: dict[str, Any] = {k: _wandb_table(wandb, v) for k, v in tables.items()}
        summary: dict[str, Any] = {}
        if fit.get("hero"):
            summary.update({f"predict/hero_{k}": v for k, v in fit["hero"].items() if _loggable(v)})
        if "gate" in dirs:
            gate = layout.read_json(dirs["gate"] / layout.GATE, {}) or {}
            if isinstance(gate, dict) and "passed" in gate:
                summary["gate/passed"] = bool(gate["passed"])
                summary["gate/overridden"] = bool(gate.get("overridden", False))
        if "report" in dirs:
            rep = layout.read_json(dirs["report"] / layout.REPORT, {}) or {}
            if isinstance(rep, dict):
                summary.update({f"report/{k}": v for k, v in rep.items() if _loggable(v) or isinstance(v, str)})
        fig = _fit_figure(fit)
        if fig is not None:
            payload["fit/loss_vs_compute"] = wandb.Plotly(fig)
        if payload:
            run.log(payload)
        for k, v in summary.items():
            run.summary[k] = v
        out = run.dir
        run.finish()
        _close_service(str(Path(out).parent))
        return out
    except Exception as exc:
        print(f"warning: W&B ladder run for {ladder} failed ({type(exc).__name__}: {exc}); files unaffected",
              file=sys.stderr)
        try:
            run.finish(exit_code=1)
        except Exception:
            pass
        return None


def _wandb_table(wandb, rows: list[dict]):
    cols: dict[str, None] = {}
    for row in rows:
        for k in row:
            cols.setdefault(k, None)
    columns = list(cols)
    return wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])


def _fit_figure(fit: dict):
    try:
        import plotly.graph_objects as go
    except ImportError:  # pragma: no cover
        return None
    runs = [r for r in fit["runs"] if isinstance(r.get("flops"), float | int) and isinstance(r.get("loss"), float | int)]
    if not runs:
        return None
    fig = go.Figure()
    fig.add_scatter(x=[r["flops"] for r in runs], y=[r["loss"] for r in runs], mode="markers", name="rungs")
    curve = fit.get("curve") or []
    if curve:
        fig.add_scatter(x=[c["flops"] for c in curve], y=[c["loss"] for c in curve], mode="lines", name="law")
    if fit.get("hero"):
        h = fit["hero"]
        fig.add_scatter(x=[h["flops"]], y=[h["loss"]], mode="markers", name="hero (predicted)")
    fig.update_xaxes(type="log", title="FLOPs")
    fig.update_yaxes(type="log", title="loss")
    return fig


# ------------------------------------------------------------------------------------------
# Hooks for ladder.dag.step_fns (a step's config dict and its executor StepContext).


def _local_root(ctx) -> tuple[str, str]:
    """(local folder for W&B files, ladder name) for a step context; remote roots log to a tmp dir."""
    root = str(getattr(ctx, "root", "") or "")
    ladder = getattr(ctx, "ladder", "") or ""
    if not root or not ladder:
        out = Path(str(getattr(ctx, "out_dir", ".")).removeprefix("file://"))
        root, ladder = root or str(out.parent.parent), ladder or out.parent.name
    if root.startswith("file://"):
        root = root[len("file://"):]
    if "://" in root:  # gs://, s3://: W&B needs a local folder
        import tempfile

        root = str(Path(tempfile.gettempdir()) / "scaling-ladder-wandb")
    return root, ladder


def training_callbacks(config: dict, ctx) -> list:
    """The W&B callback for a training step run by ladder.dag.step_fns.train_step ([] when disabled)."""
    runtime = getattr(ctx, "runtime", None) or {}
    wb = config.get("wandb") or {}
    mode = resolve_mode(runtime.get("wandb_mode"), wb.get("mode"))
    if mode == "disabled":
        return []
    root, ladder = _local_root(ctx)
    ladder = config.get("ladder") or ladder
    name = getattr(ctx, "name", None) or (config.get("rung") or {}).get("name") or "train"
    cfg = {k: v for k, v in config.items() if k != "wandb"}
    cfg["step"] = {"name": name, "hash": getattr(ctx, "hash", None), "out_dir": str(getattr(ctx, "out_dir", ""))}
    return [WandbCallback(root=root, ladder=ladder, step_name=name, config=_plain(cfg), mode=mode,
                          entity=wb.get("entity") or os.environ.get("WANDB_ENTITY"),
                          project=wb.get("project") or os.environ.get("WANDB_PROJECT"),
                          job_type=str(config.get("role") or "train"), salt=str(getattr(ctx, "hash", "") or ""),
                          tags=tuple(wb.get("tags") or ()), notes=wb.get("notes") or "")]


def log_ladder_step(config: dict, ctx) -> str | None:
    """Call at the end of fit, predict and report steps: (re)logs the ladder-level run."""
    runtime = getattr(ctx, "runtime", None) or {}
    wb = config.get("wandb") or {}
    mode = resolve_mode(runtime.get("wandb_mode"), wb.get("mode"))
    if mode == "disabled":
        return None
    root, ladder = _local_root(ctx)
    return log_ladder_run(root, config.get("ladder") or ladder, mode=mode, entity=wb.get("entity"),
                          project=wb.get("project"), tags=tuple(wb.get("tags") or ()), notes=wb.get("notes") or "")
