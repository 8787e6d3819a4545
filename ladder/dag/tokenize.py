"""The tokenize stage: one content-addressed step per data source (``tokenize_<domain>``), keyed by the
source's digest, the tokenizer's digest (or the ``tokenizer`` step it depends on) and the shard format,
that writes the source's token shards (ladder.trainers.builtin.shards) to the ladder's root. Rungs and the hero
depend on it as data and map its shards.

Documents are grouped, in the source's order, into shards of about ``SHARD_BYTES`` of text; each shard is
tokenized in its own Ray task (when the step runs under Ray) and its record is written after its files,
so a killed tokenize resumes shard by shard: a shard with a record is not tokenized again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np

from ladder.dag import kinds
from ladder.trainers.builtin.shards import (
    FORMAT_VERSION,
    KINDS,
    MANIFEST,
    SPLITS,
    file_name,
    npy_bytes,
    put,
    read_json,
    record_name,
    token_dtype,
)

PREFIX = "tokenize_"
FN = "ladder.dag.tokenize:tokenize_step"
SHARD_BYTES = 64 << 20
CODE = ("ladder/dag/tokenize.py", "ladder/trainers/builtin/shards.py", "ladder/trainers/builtin/hf_tokenizer.py",
        "ladder/trainers/builtin/tokenizer.py", "ladder/trainers/builtin/sources.py")


def step_name(domain: str) -> str:
    return f"{PREFIX}{domain}"


def tokenizer_digest(name: str) -> str:
    """What a tokenizer is: ``bytes``, a declared one's name, or a tokenizer.json's sha256 (a ``bpe:`` one is
    its step's hash)."""
    from ladder.trainers.builtin.tokenizer import bpe_vocab, declared_vocab, get_tokenizer

    if name == "bytes" or bpe_vocab(name) is not None or declared_vocab(name) is not None:
        return name
    return get_tokenizer(name).digest


def _source_size(source: str) -> str:
    from ladder.trainers.builtin.sources import is_url, list_files

    if source.startswith("builtin:"):
        return "built-in"
    try:
        fs, files = list_files(source if is_url(source) else str(source))
        total = sum(int(fs.size(p) or 0) for p, _ in files)
    except (ValueError, OSError):
        return "size unknown"
    return f"{total / 1e6:.1f} MB in {len(files)} file{'s' if len(files) != 1 else ''}"


def tokenize_steps(spec) -> list:
    """The ladder's tokenizer step (``bpe:``) and one tokenize step per domain; none for ``bytes`` (held in
    memory) nor for a declared tokenizer (nothing here to tokenize with: its runs are imported)."""
    from ladder.dag import bpe
    from ladder.executor import Dep, Step
    from ladder.executor.provenance import versions
    from ladder.trainers.builtin.digest import source_digest
    from ladder.trainers.builtin.tokenizer import bpe_vocab

    data = spec.data
    if not _shards(data.tokenizer):
        return []
    steps, deps = [], ()
    if bpe_vocab(data.tokenizer) is not None:
        steps.append(bpe.bpe_step_for(spec))
        deps = (Dep(bpe.STEP),)
    digest = tokenizer_digest(data.tokenizer)
    for dom in data.domains:
        config = {"domain": dom.name, "source": dom.source, "tokenizer": data.tokenizer, "tokenizer_digest": digest,
                  "heldout_frac": float(data.heldout_frac), "format": FORMAT_VERSION, "shard_bytes": SHARD_BYTES,
                  "inputs": {"data": source_digest(dom.source), "packages": versions(("tokenizers", "numpy"))}}
        steps.append(Step(name=step_name(dom.name), kind=kinds.TOKENIZE, fn=FN, config=config, deps=deps, code=CODE,
                          description=f"tokenize {dom.source} ({_source_size(dom.source)})"))
    return steps


def _shards(tokenizer: str) -> bool:
    from ladder.trainers.builtin.tokenizer import declared_vocab

    return tokenizer != "bytes" and declared_vocab(tokenizer) is None


def shard_deps(spec) -> tuple:
    """A training step's token shards; and a ``bpe:`` ladder's tokenizer when the run scores tasks (it encodes
    their items), which a ladder without tasks does not depend on directly (its step hashes stay)."""
    from ladder.dag import bpe
    from ladder.executor import Dep
    from ladder.trainers.builtin.tokenizer import bpe_vocab

    if not _shards(spec.data.tokenizer):
        return ()
    tokenizer = (Dep(bpe.STEP),) if spec.data.tasks and bpe_vocab(spec.data.tokenizer) is not None else ()
    return tuple(Dep(step_name(d.name)) for d in spec.data.domains) + tokenizer


def refuse_declared_training(spec, entries, steps) -> None:
    """One line (a SpecError) before anything runs when a training step would run on a declared tokenizer."""
    from ladder.spec import SpecError
    from ladder.trainers.builtin.tokenizer import declared_refusal

    trains = {s.name for s in steps if s.kind == kinds.TRAIN}
    pending = [e.name for e in entries if e.action == "run" and e.name in trains]
    if pending:
        raise SpecError([declared_refusal(spec.data.tokenizer, ", ".join(pending))])


def shard_dirs(dep_dirs: dict[str, str]) -> dict[str, str]:
    """Domain name -> its tokenize step's folder, from a training step's dep folders."""
    return {k[len(PREFIX):]: v for k, v in dep_dirs.items() if k.startswith(PREFIX)}


# ------------------------------------------------------------------------------------------------
# The step function.


def _groups(docs: Iterator[tuple[str, str]], shard_bytes: int) -> Iterator[list[tuple[str, str]]]:
    group, size = [], 0
    for name, text in docs:
        if not text:
            continue
        group.append((name, text))
        size += len(text)
        if size >= shard_bytes:
            yield group
            group, size = [], 0
    if group:
        yield group


@functools.lru_cache(maxsize=4)
def _tokenizer(name: str, trained: str | None):
    from ladder.trainers.builtin.tokenizer import get_tokenizer

    return get_tokenizer(name, trained)


def write_shard(out_dir: str, index: int, docs: list[tuple[str, str]], tokenizer: str, trained: str | None,
                heldout_frac: float) -> dict:
    """Tokenize one shard's documents and write its files, then its record; returns the record."""
    import hashlib

    import fsspec

    from ladder.trainers.builtin.data import is_heldout

    tok = _tokenizer(tokenizer, trained)
    dtype = token_dtype(tok.vocab_size)
    fs, root = fsspec.core.url_to_fs(out_dir)
    root = root.rstrip("/")
    encoded = tok.encode_batch([text for _, text in docs])
    record = {"index": index, "splits": {}}
    for split in SPLITS:
        held = split == "heldout"
        parts = [enc for (name, _), enc in zip(docs, encoded, strict=True) if is_heldout(name, heldout_frac) == held]
        lengths = np.array([ids.size + 1 for ids, _ in parts], dtype=np.int64)
        tokens = np.empty(int(lengths.sum()), dtype)
        nbytes = np.zeros(tokens.size, np.uint16)  # the end-of-text token stands for no text
        starts = np.cumsum(lengths) - lengths
        for (ids, counts), start in zip(parts, starts, strict=True):
            tokens[start : start + ids.size] = ids
            tokens[start + ids.size] = tok.eot
            nbytes[start : start + ids.size] = counts
        files = {}
        for kind, arr in zip(KINDS, (tokens, nbytes, starts), strict=True):
            raw = npy_bytes(arr)
            put(fs, f"{root}/{file_name(index, split, kind)}", raw)
            files[kind] = {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
        record["splits"][split] = {"tokens": int(tokens.size), "docs": len(parts),
                                   "bytes": int(nbytes.sum(dtype=np.int64)), "files": files}
    put(fs, f"{root}/{record_name(index)}", _json(record))
    return record


def _json(obj) -> bytes:
    import json

    return json.dumps(obj, sort_keys=True, indent=1).encode()


def _finished(fs, root: str, index: int) -> dict | None:
    """A shard's record when it and its files are whole (a killed run leaves none or all of a shard)."""
    record = read_json(fs, f"{root}/{record_name(index)}")
    if record is None:
        return None
    for split in SPLITS:
        for kind, meta in record["splits"][split]["files"].items():
            path = f"{root}/{file_name(index, split, kind)}"
            if not fs.exists(path) or fs.size(path) != meta["size"]:
                return None
    return record


def tokenize(config: dict, out_dir: str, *, trained: str | None = None,
             progress: Callable[..., None] | None = None, should_stop: Callable[[], bool] | None = None) -> dict:
    """Write a source's token shards and manifest to ``out_dir``; finished shards are kept."""
    import fsspec

    from ladder.trainers.builtin.data import DataError, documents

    tok = _tokenizer(config["tokenizer"], trained)
    fs, root = fsspec.core.url_to_fs(out_dir)
    root = root.rstrip("/")
    runner = _Runner(out_dir, config, trained)
    records: dict[int, dict] = {}
    reused = 0
    for index, docs in enumerate(_groups(documents(config["source"]), int(config["shard_bytes"]))):
        if should_stop is not None and should_stop():
            from ladder.executor import Interrupted

            raise Interrupted(f"{config['domain']}: tokenize stopped after {len(records)} shards")
        done = _finished(fs, root, index)
        if done is not None:
            records[index] = done
            reused += 1
            continue
        records.update(runner.submit(index, docs))
        if progress is not None:  # shards written so far (the total is known once the source is read)
            progress(step=len(records))
    records.update(runner.drain())
    if progress is not None:
        progress(step=len(records), total_steps=len(records))
    shards = [records[i] for i in sorted(records)]
    totals = {s: {k: sum(r["splits"][s][k] for r in shards) for k in ("tokens", "docs", "bytes")} for s in SPLITS}
    if not totals["train"]["docs"]:
        raise DataError(f"{config['source']}: no training text found")
    if not totals["heldout"]["docs"]:
        raise DataError(f"{config['source']}: no document fell in the held-out split; raise data.heldout_frac "
                        "or add documents")
    manifest = {"format": FORMAT_VERSION, "domain": config["domain"], "source": config["source"],
                "tokenizer": {"name": config["tokenizer"], "digest": getattr(tok, "digest", config["tokenizer"]),
                              "vocab_size": int(tok.vocab_size), "eot": int(tok.eot)},
                "dtype": token_dtype(tok.vocab_size).name, "shards": shards, "totals": totals}
    put(fs, f"{root}/{MANIFEST}", _json(manifest))
    return {"shards": len(shards), "reused_shards": reused, "vocab_size": int(tok.vocab_size), **{
        f"{s}_{k}": v for s in SPLITS for k, v in totals[s].items()}}


class _Runner:
    """Shards tokenized in parallel Ray tasks when Ray is up (a bounded number in flight), else here."""

    def __init__(self, out_dir: str, config: dict, trained: str | None):
        self.args = (config["tokenizer"], trained, float(config["heldout_frac"]))
        self.out_dir = out_dir
        self.pending: list = []
        self.remote = None
        try:
            import ray

            if ray.is_initialized():
                self.remote = ray.remote(num_cpus=1)(write_shard)
                self.limit = max(2, int(ray.available_resources().get("CPU", 1)) + 1)
        except ModuleNotFoundError:
            pass

    def submit(self, index: int, docs) -> dict[int, dict]:
        if self.remote is None:
            return {index: write_shard(self.out_dir, index, docs, *self.args)}
        self.pending.append(self.remote.remote(self.out_dir, index, docs, *self.args))
        if len(self.pending) < self.limit:
            return {}
        import ray

        ready, self.pending = ray.wait(self.pending, num_returns=1)
        return {r["index"]: r for r in ray.get(ready)}

    def drain(self) -> dict[int, dict]:
        if not self.pending:
            return {}
        import ray

        out = {r["index"]: r for r in ray.get(self.pending)}
        self.pending = []
        return out


def tokenize_step(config: dict, ctx) -> dict:
    from ladder.dag import bpe

    trained = ctx.dep_path(bpe.STEP, bpe.FILE) if bpe.STEP in ctx.dep_dirs else None
    return tokenize(config, ctx.out_dir, trained=trained, progress=ctx.progress,
                    should_stop=lambda: ctx.stop_requested)


def plan_rows(spec, entries) -> list[dict]:
    """The tokenize stage as `ladder plan` lists it: each source, its size, and once tokenized its shards."""
    import fsspec

    steps = {s.name: s for s in tokenize_steps(spec)}
    rows = []
    for e in entries:
        if e.name not in steps or not e.name.startswith(PREFIX):
            continue
        row = {"step": e.name, "source": steps[e.name].config["source"], "about": steps[e.name].description}
        fs, root = fsspec.core.url_to_fs(e.path)
        manifest = read_json(fs, f"{root.rstrip('/')}/{MANIFEST}")
        if manifest is not None:
            totals = manifest["totals"]
            row.update(shards=len(manifest["shards"]), train_tokens=totals["train"]["tokens"],
                       heldout_tokens=totals["heldout"]["tokens"], text_bytes=totals["train"]["bytes"] + totals["heldout"]["bytes"])
        rows.append(row)
    return rows


def plan_lines(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        done = (f"{r['shards']} shards, {r['train_tokens']:.3g} train + {r['heldout_tokens']:.3g} held-out tokens "
                f"from {r['text_bytes'] / 1e6:.1f} MB of text" if "shards" in r else "not tokenized yet")
        out.append(f"{r['step']}: {r['about']}; {done}")
    return out
