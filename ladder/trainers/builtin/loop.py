"""The training loop: ``train(rung, data, out_dir)`` -> result dict, resumable to the bit.

Execution model. The model is split once into (graphdef, params, router bias); one jitted function
runs up to ``k`` optimizer steps in a loop over pre-fetched batches (the count a runtime argument, so one
compile serves every chunk) and returns every step's metrics (so losses stay per-step while dispatch is
amortised). Chunks of at most ``steps_per_call`` steps are cut at every multiple of it and at *boundaries*
(evals, checkpoints, branch starts, the stop step); every chunk runs the same program, one step after
another, so a run resumed from any checkpoint replays exactly the computations of an uninterrupted run.

Devices: the state lives on a data-parallel mesh over the node's local devices when there is more
than one (:mod:`ladder.trainers.builtin.parallel`: batches split along the batch, parameters replicated or
FSDP-sharded); on one device the jitted functions are plain ``jax.jit`` as they always were.

At a boundary step s, in order: eval (if due), WSD cooldown branches starting at s, checkpoint (if
due). SIGTERM sets a flag checked after every chunk: the loop checkpoints, then re-raises SIGTERM
with the previous handler. ``should_stop`` (a stopping ladder driver's request) is checked at the
same points: the loop checkpoints and returns ``{"status": "INTERRUPTED"}``. In a gang both are ored
over its processes at each check, so every process stops at the same step. A non-finite loss ends
the run FAILED (result.json says where and why); ``train`` returns that result, or raises
:class:`Diverged` when ``raise_on_divergence=True``. Outputs written for another config (or seed)
are refused with :class:`TrainConfigMismatch`, naming the fields that differ.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ladder.outputs.layout import write_json_atomic
from ladder.spec import DataSpec, RungSpec, data_from_dict, resolve_rung, rung_from_dict, to_dict
from ladder.trainers.builtin import optim as optim_lib
from ladder.trainers.builtin.checkpoint import Checkpointer
from ladder.trainers.builtin.evaluate import eval_model, make_run_eval
from ladder.trainers.builtin.hooks import Callback, call_hooks
from ladder.trainers.builtin.jitted import DEFAULT_STEPS_PER_CALL, make_eval, make_train_chunk, segments
from ladder.trainers.builtin.metrics import JsonlWriter, SpikeDetector, read_jsonl
from ladder.trainers.builtin.mirror import OutputDir, open_output
from ladder.trainers.builtin.model import build
from ladder.trainers.builtin.outputs import check_same_config, summarise, write_json_lines
from ladder.trainers.builtin.parallel import plan
from ladder.trainers.builtin.peaks import run_peak_flops
from ladder.trainers.builtin.sigterm import Sigterm, any_process
from ladder.trainers.builtin.start import start as run_start
from ladder.trainers.builtin.stream import open_mixture
from ladder.trainers.builtin.task_eval import task_runner
from ladder.trainers.cadence import cadence


class Diverged(RuntimeError):
    """Raised by ``train(..., raise_on_divergence=True)`` on a non-finite loss; ``.result`` holds result.json."""

    def __init__(self, result: dict):
        super().__init__(result.get("message", "training diverged"))
        self.result = result


def train(
    rung: RungSpec | Mapping[str, Any],
    data: DataSpec | Mapping[str, Any],
    out_dir: str | os.PathLike | OutputDir,
    *,
    max_steps: int | None = None,
    callbacks: Sequence[Callback] = (),
    progress: Callable[[dict], None] | None = None,
    raise_on_divergence: bool = False,
    steps_per_call: int | None = None,
    dispatch: str = "capacity",
    should_stop: Callable[[], bool] | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    shard_dirs: Mapping[str, str] | None = None,
    tokenizer_file: str | None = None,
) -> dict:
    """Train one rung into ``out_dir`` (resuming from its newest valid checkpoint) and return result.json.

    ``out_dir`` is a local path, an fsspec URL (the run works in a local scratch folder mirrored to
    it, see :mod:`ladder.trainers.builtin.mirror`), or an open :class:`OutputDir` the caller also writes into.
    ``max_steps`` stops early at that absolute step (the schedule is still the full run's; the result
    has ``complete: false`` and a later call continues). ``raise_on_divergence`` raises
    :class:`Diverged` after writing the FAILED result instead of returning it.
    ``steps_per_call`` (default 64, env ``LADDER_STEPS_PER_CALL``) optimizer steps run per jitted call.
    ``checkpoint_dir``: where checkpoints go (default ``out_dir/checkpoints``): a gang's processes share the
    first's, each writing its own shards, while their other outputs stay apart (:mod:`ladder.trainers.builtin.gang`).
    ``tokenizer_file``: the tokenizer.json a ``bpe:`` ladder trained, which encodes ``data.tasks``.
    """
    # Close the mirror only when it was opened here: a caller's OutputDir stays open for its own writes.
    with contextlib.nullcontext(out_dir) if isinstance(out_dir, OutputDir) else open_output(out_dir) as output:
        t_start = time.perf_counter()
        if isinstance(rung, Mapping):
            rung = rung_from_dict(rung)
        if isinstance(data, Mapping):
            data = data_from_dict(data)
        if not isinstance(rung.batch_size, int) or not isinstance(rung.optim.lr, float | int) or rung.seed is None:
            rung = resolve_rung(rung, rung.seed if rung.seed is not None else 0)
        out = output.local
        total_steps = rung.steps
        stop = total_steps if max_steps is None else max(1, min(total_steps, int(max_steps)))

        config = {"rung": to_dict(rung), "data": to_dict(data)}
        check_same_config(out / "train_config.json", config, output.url or str(out))
        prev = out / "result.json"
        if prev.exists():
            try:
                import json

                old = json.loads(prev.read_text())
                if old.get("status") == "SUCCESS" and old.get("complete") and old.get("total_steps") == total_steps:
                    call_hooks(callbacks, "on_end", old)
                    return old
            except (ValueError, OSError):
                pass
            prev.unlink(missing_ok=True)
        write_json_atomic(out / "train_config.json", config)

        mspec = rung.model
        seed = int(rung.seed)
        k = max(1, int(steps_per_call or DEFAULT_STEPS_PER_CALL))
        batch, seq = rung.batch_size, rung.seq_len
        tokens_per_step = batch * seq
        fpt = mspec.flops_per_token(seq)

        mixture = open_mixture(data, seq, seed, shard_dirs)
        if data.switch_at > 0:  # a data-mix change mid-run (a hero's declared change, or its replay on a rung)
            mixture.switch(round(data.switch_at * total_steps), batch, data.switch_weights)
        if getattr(mixture, "vocab_size", 0) > mspec.vocab:
            raise ValueError(f"{rung.name}.model.vocab: {mspec.vocab} is smaller than its tokenizer's "
                             f"{mixture.vocab_size} tokens; raise vocab or leave it at the default")
        # Drawn on the host: a sharded run places each device's shards only (no device holds the whole state).
        fm = build(mspec, seed, dispatch=dispatch, host=True, remat=rung.resources.remat)
        opt = optim_lib.make_optimizer(rung.optim, fm.params)
        mults = optim_lib.lr_multipliers(fm.param_names, rung.optim)
        # None on one device: the single-device path is left exactly as it was (bit-identical numerics).
        layout = plan(rung, fm.params, fm.bias, jax.eval_shape(opt.init, fm.params))
        if layout is not None:
            print(f"[ladder.train] {rung.name}: data parallel over {layout.n} {jax.local_devices()[0].platform} "
                  f"devices, parameters {layout.mode}", flush=True)
        lrs = optim_lib.lr_schedule(rung, total_steps).astype(np.float32)
        branches = optim_lib.branch_points(rung, total_steps)
        eval_steps = cadence(total_steps, rung.eval_every, rung.n_evals)
        ckpt_steps = cadence(total_steps, rung.checkpoint_every, rung.n_checkpoints)

        ckpt = Checkpointer(checkpoint_dir or out / "checkpoints",
                            shown_as=f"{output.url}/checkpoints" if output.remote else None)
        begun = run_start(rung.name, seed, fm, opt, layout, ckpt, output)
        start, wall_offset = begun.step, begun.wall_s
        params, bias, opt_state = begun.params, begun.bias, begun.opt_state

        metrics_w = JsonlWriter(out / "metrics.jsonl", keep_until=start)
        eval_w = JsonlWriter(out / "eval.jsonl", keep_until=start)
        events_w = JsonlWriter(out / "events.jsonl", keep_until=start)
        (out / "branches").mkdir(exist_ok=True)
        branch_rows = [r for r in read_jsonl(out / "branches.jsonl") if r.get("start", 0) <= start]
        write_json_lines(out / "branches.jsonl", branch_rows)

        chunk_fn = make_train_chunk(fm, opt, mults, layout, k, microbatches=rung.resources.microbatches)
        eval_fm = eval_model(fm, data, seed)
        eval_fn = make_eval(eval_fm, layout)
        run_tasks = task_runner(data, seq, eval_fm, layout, tokenizer_file)
        peak, _ = run_peak_flops(rung.model.compute_dtype, layout.n if layout is not None else 1)
        detectors = [SpikeDetector("loss"), SpikeDetector("grad_norm")]
        bias_detector = SpikeDetector("router_bias_norm", on_diff=True) if fm.bias_names else None
        if start > 0:  # warm the detectors with the history kept
            for row in metrics_w.rows_kept:
                for d in detectors:
                    d.update(row["step"], row.get(d.metric))

        boundaries = {stop}
        boundaries |= {b for b in eval_steps | ckpt_steps if b < stop}
        boundaries |= {b["start"] for b in branches if b["start"] < stop}
        boundaries = sorted(b for b in boundaries if b > start)

        sigterm = Sigterm()
        sigterm.install()

        def stopping() -> bool:  # a gang's processes agree: all of them stop at one step, or none does
            return any_process(sigterm.flag or (should_stop is not None and bool(should_stop())))

        state = {
            "last_finite": metrics_w.rows_kept[-1] if metrics_w.rows_kept else None,
            "eval": eval_w.rows_kept[-1] if eval_w.rows_kept else None,
            "tokens_timed": 0,
            "time_timed": 0.0,
            "warm": False,  # the first chunk call compiles: kept out of tokens_per_s
            "log_t": time.perf_counter(),
            "log_step": start,
            "loss_sum": 0.0,
            "loss_n": 0,
        }

        def wall() -> float:
            return wall_offset + time.perf_counter() - t_start

        run_eval = make_run_eval(mixture, eval_fn, batch, seq, fpt, devices=layout.n if layout is not None else 1,
                                 run_tasks=run_tasks)
        my_rows = layout.process_rows(batch) if layout is not None and layout.multiprocess else None

        def run_steps(p, b, o, first: int, end: int, lr_of: Callable[[int], np.ndarray], on_rows: Callable):
            """Run steps first..end-1; on_rows(list of per-step metric dicts) after each chunk.

            Returns (p, b, o, failed_step or None, step reached)."""
            segs = segments(first, end, k)
            nxt = mixture.batches(segs[0][0], segs[0][1], batch, my_rows) if segs else None
            for idx, (s0, n) in enumerate(segs):
                t0 = time.perf_counter()
                p_new, b_new, o_new, m = chunk_fn(p, b, o, nxt, lr_of(s0, n), batch)
                if idx + 1 < len(segs):  # build the next batches while the chunk runs
                    s1, n1 = segs[idx + 1]
                    nxt = mixture.batches(s1, n1, batch, my_rows)
                m = jax.device_get(m)
                dt = time.perf_counter() - t0
                if state["warm"]:
                    state["tokens_timed"] += n * tokens_per_step
                    state["time_timed"] += dt
                state["warm"] = True
                rows = []
                failed = None
                for i in range(n):
                    row = {key: (np.asarray(v[i]).tolist()) for key, v in m.items()}
                    row["step"] = s0 + i + 1
                    rows.append(row)
                    if failed is None and not math.isfinite(row["loss"]):
                        failed = row["step"]
                on_rows(rows, failed)
                if failed is not None:
                    return p, b, o, failed, s0
                p, b, o = p_new, b_new, o_new
                if stopping():
                    return p, b, o, None, s0 + n
            return p, b, o, None, end

        def main_rows(rows: list[dict], failed: int | None) -> None:
            for r in rows:
                step = r["step"]
                if failed is not None and step >= failed:
                    break
                full = _row(r, step)
                state["last_finite"] = full
                for d in detectors:
                    ev = d.update(step, full.get(d.metric))
                    if ev:
                        events_w.write(ev)
                if bias_detector is not None:
                    ev = bias_detector.update(step, float(np.linalg.norm(r["router_bias_norm"])))
                    if ev:
                        events_w.write(ev)
                # Tiny CPU batches make one step's loss noisy (~10%); the mean over the logged interval is
                # what curves are fitted and compared on.
                state["loss_sum"] += full["loss"]
                state["loss_n"] += 1
                if step % rung.log_every == 0 or step == stop:
                    full["loss_mean"] = state["loss_sum"] / state["loss_n"]
                    state["loss_sum"], state["loss_n"] = 0.0, 0
                    now = time.perf_counter()
                    dt = max(now - state["log_t"], 1e-9)
                    tps = (step - state["log_step"]) * tokens_per_step / dt
                    state["log_t"], state["log_step"] = now, step
                    full["tokens_per_s"] = tps
                    full["mfu"] = tps * fpt / peak
                    full["wall_s"] = wall()
                    metrics_w.write(full)
                    output.sync()
                    call_hooks(callbacks, "on_step", step, full)
                    if progress is not None:
                        # Rows arrive a compiled chunk at a time, so one logging interval's rate swings
                        # with where the chunk boundaries fall: the ETA uses the run's mean rate so far
                        # (compiles excluded), the rate a user sees at the end too. The first chunk's rows
                        # have none: its time is mostly the compile, and a rate from it reads many times low.
                        rate = state["tokens_timed"] / state["time_timed"] if state["time_timed"] > 0 else None
                        left = (stop - step) * tokens_per_step / rate if rate else None
                        progress({"step": step, "total_steps": stop, "tokens": full["tokens"], "loss": full["loss"],
                                  "tokens_per_s": rate, "eta_s": left})

        def _row(r: dict, step: int) -> dict:
            full = {"step": step, "tokens": step * tokens_per_step}
            for key in ("loss", "lr", "grad_norm", "param_norm", "update_norm", "objective"):
                full[key] = float(r[key])
            if "router_bias_norm" in r:
                for i, v in enumerate(r["router_bias_norm"]):
                    full[f"router_bias_norm_l{i}"] = float(v)
                for key in ("expert_load_max_over_mean", "drop_rate", "routing_entropy", "aux_loss"):
                    full[key] = float(r[key])
            full["flops"] = step * tokens_per_step * fpt
            return full

        def run_branch(p, b, o, br: dict) -> None:
            start_b, end_b = br["start"], br["end"]
            blr = optim_lib.branch_schedule(rung, start_b, end_b).astype(np.float32)
            curve: list[list[float]] = []
            status = {"failed": None}

            def rows_cb(rows, failed):
                for r in rows:
                    curve.append([r["step"], float(r["lr"]), float(r["loss"])])
                status["failed"] = failed

            p2, b2, _, failed, _ = run_steps(p, b, o, start_b, end_b, lambda s0, n: blr[s0 - start_b : s0 - start_b + n],
                                          rows_cb)
            rec = {"frac": br["frac"], "start": start_b, "steps": end_b, "tokens": end_b * tokens_per_step,
                   "flops": end_b * tokens_per_step * fpt}
            if failed is not None:
                rec.update(status="FAILED", failed_step=failed, final_eval_loss=None, final_train_loss=None)
            elif stopping():
                return
            else:
                ev = run_eval(p2, b2, end_b, data.final_tokens)  # a branch's final is fitted too
                tail = [c[2] for c in curve[-max(1, min(len(curve), rung.log_every)) :]]
                rec.update(status="SUCCESS", final_eval_loss=ev["eval_loss"], final_train_loss=float(np.mean(tail)),
                           final_eval_loss_by_domain={d.name: ev[f"eval_loss/{d.name}"] for d in mixture.domains},
                           eval=ev)
            write_json_lines(out / "branches" / f"branch-{br['frac']:g}.jsonl",
                             [{"step": s, "lr": lr, "loss": loss} for s, lr, loss in curve])
            rec["curve"] = curve
            branch_rows.append(rec)
            write_json_lines(out / "branches.jsonl", branch_rows)

        def save(step: int) -> None:
            ckpt.save(step, params, bias, opt_state, {"step": step, "seed": seed, "wall_s": wall()})
            output.checkpoint(ckpt.max_to_keep)
            call_hooks(callbacks, "on_checkpoint", step)

        failed_step = None
        s = start
        try:
            for bnd in boundaries:
                params, bias, opt_state, failed_step, reached = run_steps(
                    params, bias, opt_state, s, bnd, lambda s0, n: lrs[s0 : s0 + n], main_rows
                )
                if failed_step is not None:
                    break
                if reached < bnd or stopping():
                    s = reached
                    save(s)
                    ckpt.close()
                    for w in (metrics_w, eval_w, events_w):
                        w.close()
                    if sigterm.flag:
                        sigterm.restore_and_reraise()
                    return {"status": "INTERRUPTED", "steps": s}
                s = bnd
                if s in eval_steps or s == stop:
                    row = run_eval(params, bias, s, data.eval_tokens)
                    eval_w.write(row)
                    state["eval"] = row
                    call_hooks(callbacks, "on_eval", s, row)
                for br in branches:
                    if br["start"] == s:
                        run_branch(params, bias, opt_state, br)
                if s in ckpt_steps or s == stop:
                    save(s)
        finally:
            sigterm.uninstall()

        if failed_step is None and s == total_steps and data.final_tokens != data.eval_tokens:
            # The number the laws fit, on its larger sample; a finished run resumed here reads it again.
            # Its task columns are the last eval's, on the same parameters (the tasks' items do not grow with it).
            final = run_eval(params, bias, s, data.final_tokens, tasks=False)
            state["final_eval"] = {**final, **{k: v for k, v in (state["eval"] or {}).items() if k.startswith("task_")}}
        result = summarise(rung, data, mixture, state, metrics_w, failed_step, stop, total_steps, tokens_per_step,
                         fpt, wall(), branch_rows, s, layout)
        if failed_step is not None:
            events_w.write({"step": failed_step, "event": "divergence", "metric": "loss", "value": None,
                            "size": None, "message": result["message"]})
        for w in (metrics_w, eval_w, events_w):
            w.close()
        ckpt.close()
        write_json_atomic(out / "result.json", result)
        call_hooks(callbacks, "on_end", result)
        output.checkpoint(ckpt.max_to_keep)
        if failed_step is not None and raise_on_divergence:
            raise Diverged(result)
        return result
