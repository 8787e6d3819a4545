"""Validation of ``data``: domains and their sources, the tokenizer, the eval samples and the tasks."""

from __future__ import annotations

from pathlib import Path

from .model import BUILTIN_SOURCES
from .runs import DataSpec
from .validate_checks import check_choice, check_type, number_in, positive_int
from .validate_tasks import validate_tasks


def _check_sources(problems: list[str], path: str, d: DataSpec, base_dir: Path) -> None:
    """Each file or URL source lists and yields a first document (an unreadable URL, a JSONL line without
    'text', a parquet file without a 'text' column), before a step starts and writes anything."""
    from ladder.trainers.builtin.sources import SourceError, can_read, check

    for i, dom in enumerate(d.domains):
        if dom.source.startswith("builtin:"):
            continue
        source = dom.source
        if "://" not in source and not Path(source).expanduser().exists():
            continue  # reported above (it does not exist), or relative to the experiment only
        if not can_read(source):
            # no fsspec package for its scheme here (gcsfs for a gs:// corpus): a spec planned on a laptop
            # and trained on the cluster that has it; its tokenize step says so if it runs here
            continue
        try:
            check(source)
        except SourceError as exc:
            problems.append(f"{path}.domains[{i}].source: {exc}")


def _validate_data(problems: list[str], path: str, d: DataSpec, base_dir: Path | None) -> None:
    if not d.domains:
        problems.append(f"{path}.domains: at least one domain is required")
    names = set()
    for i, dom in enumerate(d.domains):
        p = f"{path}.domains[{i}]"
        if dom.name in names:
            problems.append(f"{p}.name: duplicate domain name {dom.name!r}")
        names.add(dom.name)
        number_in(problems, f"{p}.weight", dom.weight, 0, 1e6, lo_open=True)
        if dom.source.startswith("builtin:"):
            check_choice(problems, f"{p}.source", dom.source, BUILTIN_SOURCES)
        elif "://" not in dom.source:
            src = Path(dom.source)
            if not src.is_absolute() and base_dir is not None:
                src = base_dir / src
            if not src.exists():
                problems.append(f"{p}.source: {dom.source} does not exist; give a file, folder or builtin:*")
    from .vocab import tokenizer_problem

    problem = tokenizer_problem(d.tokenizer, base_dir)
    if problem:
        problems.append(problem)
    elif base_dir is not None:
        _check_sources(problems, path, d, base_dir)
    number_in(problems, f"{path}.heldout_frac", d.heldout_frac, 0, 0.5, lo_open=True)
    positive_int(problems, f"{path}.eval_tokens", d.eval_tokens)
    check_choice(problems, f"{path}.eval_sample", d.eval_sample, ("spread", "head"))
    if (check_type(problems, f"{path}.final_eval_tokens", d.final_eval_tokens, (int,), "a non-negative integer")
            and d.final_eval_tokens < 0):
        problems.append(f"{path}.final_eval_tokens: must be >= 0 (0: eval_tokens), got {d.final_eval_tokens}")
    check_type(problems, f"{path}.eval_dropless", d.eval_dropless, (bool,), "True or False")
    validate_tasks(problems, path, d, base_dir)
