"""How much each rung repeats its training text, and whether the rungs differ enough to bias the fit.

A rung records the passes it made over each domain's training windows (``epochs_by_domain``). Below one
pass every window is new; past it, text repeats, and a repeated token teaches less than a new one (Muennighoff
et al. 2023, "Scaling Data-Constrained Language Models": about 4 epochs cost little, more cost much). A law
fitted to rungs where the small ones see fresh text and the large ones repeat it bends with the repetition,
not with scale, so the report warns when any rung passes a domain more than once and the rungs' passes
differ by more than ``RATIO``.
"""

from __future__ import annotations

RATIO = 2.0


def warnings(rungs: list[dict]) -> list[str]:
    """One line per domain whose repetition differs across the finished rungs enough to bias the fit."""
    by_domain: dict[str, dict[str, float]] = {}
    for r in rungs:
        for domain, epochs in (r.get("epochs_by_domain") or {}).items():
            by_domain.setdefault(domain, {})[r["name"]] = float(epochs)
    out = []
    for domain, seen in sorted(by_domain.items()):
        lo, hi = min(seen.values()), max(seen.values())
        if hi > 1.0 and hi > RATIO * lo:
            most = max(seen, key=seen.get)
            least = min(seen, key=seen.get)
            out.append(f"data repetition: {domain} is seen {lo:.2g} times by {least} but {hi:.2g} times by {most}; "
                       "repeated text teaches less than new text, so the fit bends with repetition as well as scale "
                       "(add text to the domain or lower its weight)")
    return out


def standard_errors(rungs: list[dict]) -> str | None:
    """The final evals' standard errors as one line, None when no rung recorded one."""
    parts = [f"{r['name']} ±{r['final_eval_loss_se']:.3g}" for r in rungs if r.get("final_eval_loss_se") is not None]
    if not parts:
        return None
    return "final eval standard error (over its windows): " + ", ".join(parts)
