"""The run's batches and eval windows: the project's own data pipeline (numpy, no JAX), so this trainer reads
exactly the windows the built-in one reads. From each domain's token shards when the ladder has a tokenize
stage (``data.domains[].shards``), else the ``bytes`` tokenizer over the domain's source.

A trainer outside this repository reads the shards itself: ``ladder/trainers/builtin/shards.py`` describes the
files (flat token arrays and a manifest), and ``ladder/trainers/builtin/sampling.py`` the seeded order."""

from __future__ import annotations


def open_data(run: dict):
    from ladder.spec import DataSpec, DomainSpec
    from ladder.trainers.builtin.stream import open_mixture

    data, ev = run["data"], run["eval"]
    spec = DataSpec(domains=tuple(DomainSpec(d["name"], d["source"], float(d["weight"])) for d in data["domains"]),
                    tokenizer=data["tokenizer"], heldout_frac=float(data["heldout_frac"]),
                    eval_tokens=int(ev["tokens_per_domain"]), eval_sample=ev["sample"],
                    final_eval_tokens=int(ev["final_tokens_per_domain"]))
    shards = {d["name"]: d["shards"] for d in data["domains"] if d.get("shards")}
    return open_mixture(spec, int(run["seq_len"]), int(run["seed"]), shards or None)
