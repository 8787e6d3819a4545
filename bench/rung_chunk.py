"""One rung of a ladder spec as the benches time it: the trainer's own jitted chunk of ``steps`` steps,
the rung's placed state and that many of its real batches.

bench_sharding's child for the base revision imports this file from this tree into the base's code,
so it reads the ladder API through both layouts (before and after ladder/ was split into packages).
"""

from __future__ import annotations

from typing import Any


def rung_chunk(spec_path: str, name: str, steps: int) -> tuple[Any, tuple, Any]:
    """(chunk, state, batches): ``chunk(*state, batches, lrs)`` runs ``len(lrs)`` steps of rung ``name``."""
    from ladder.spec.load import load_spec
    from ladder.trainers.builtin import optim
    from ladder.trainers.builtin.data import Mixture
    from ladder.trainers.builtin.jitted import make_train_chunk
    from ladder.trainers.builtin.model import build
    from ladder.trainers.builtin.parallel import plan

    try:
        from ladder.dag.stages import placed
    except ImportError:  # the layout before the packages
        from ladder.stages import placed

    spec = load_spec(spec_path)
    rung = placed(spec).rung(name)
    fm = build(rung.model, 0)
    opt = optim.make_optimizer(rung.optim, fm.params)
    state = (fm.params, fm.bias, opt.init(fm.params))
    layout = plan(rung, *state)
    if layout is not None:
        state = layout.place(*state)
    chunk = make_train_chunk(fm, opt, optim.lr_multipliers(fm.param_names, rung.optim), layout, steps)
    batches = Mixture(spec.data, rung.seq_len, 0).batches(0, steps, rung.batch_size)
    return chunk, state, batches
