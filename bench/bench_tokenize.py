"""Token shards on this machine: tokenize throughput, a training process's memory against its corpus size,
and training speed from shards against the in-memory loader.

1. Tokenize throughput: the tokenize stage's shard writer (``ladder.dag.tokenize.write_shard``: batch encode,
   each token's byte count, the held-out split, .npy files and their sha256) against the tokenizers library's
   own ``encode_batch`` (ids read out) on the same documents (Python's standard library, a 4096-token BPE
   trained here), alternating, best of 3 each; target >= 0.8x.
2. Memory: the peak ``RssAnon`` (``/proc/<pid>/status``, sampled every 2 ms by a thread of the process) of a
   process training a small rung from token shards of a >= 1 GB corpus against one a twentieth of its size
   (shards memory-mapped: their pages are the page cache's, not the process's); target within 1.2x. The
   in-memory loader (``bytes``, today's) on the small corpus is printed beside, for scale.
3. Speed: steps/s of the default ladder's largest rung (experiments/tiny.py) for a few dozen steps (8 a
   jitted call; the first call, which compiles, untimed), fed by the in-memory loader (today's) and by
   shards of the same text (``bytes`` tokenized), alternating, best of 3 each; target no slower. The rest of
   the trainer is the same code in both: the data path is what changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIG_BYTES = int(float(os.environ.get("LADDER_BENCH_CORPUS_GB", "1.05")) * (1 << 30))

CHILD = r"""
import json, os, sys, threading, time
peak = [0]
def rss_anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0
stop = threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], rss_anon())
        time.sleep(0.002)
threading.Thread(target=sample, daemon=True).start()
cfg = json.loads(sys.argv[1])
from ladder.spec import data_from_dict, rung_from_dict
from ladder.trainers.builtin import train
t0 = time.perf_counter()
r = train(rung_from_dict(cfg["rung"]), data_from_dict(cfg["data"]), cfg["out"], shard_dirs=cfg.get("shards"),
          max_steps=cfg.get("max_steps"))
stop.set()
peak[0] = max(peak[0], rss_anon())
print("RESULT " + json.dumps({"peak_rss_anon": peak[0], "status": r["status"], "tokens_per_s": r["tokens_per_s"],
                              "wall_s": time.perf_counter() - t0}))
"""


def _docs(limit: int) -> list[str]:
    from ladder.trainers.builtin.data import documents

    out, size = [], 0
    for _, text in documents("builtin:stdlib_py"):
        out.append(text)
        size += len(text)
        if size >= limit:
            break
    return out


def throughput() -> None:
    from ladder.dag.tokenize import write_shard
    from ladder.trainers.builtin.hf_tokenizer import HFTokenizer, train_bpe

    texts = _docs(8 << 20)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        tok_path = Path(tmp, "tokenizer.json")
        tok_path.write_text(train_bpe(iter(texts[: len(texts) // 8]), 4096))
        lib = HFTokenizer.load(str(tok_path)).tok
        docs = [(f"doc{i}", t) for i, t in enumerate(texts)]
        best_lib, best_ours = float("inf"), float("inf")
        for r in range(3):
            t0 = time.perf_counter()
            n = sum(len(e.ids) for e in lib.encode_batch(texts, add_special_tokens=False))
            best_lib = min(best_lib, time.perf_counter() - t0)
            t0 = time.perf_counter()
            rec = write_shard(str(Path(tmp, f"shards{r}")), 0, docs, str(tok_path), None, 0.05)
            best_ours = min(best_ours, time.perf_counter() - t0)
    ours_tokens = rec["splits"]["train"]["tokens"] + rec["splits"]["heldout"]["tokens"] - len(docs)
    print(f"tokenize throughput on {mb:.1f} MB of Python source, BPE 4096 ({n:,} tokens; shards hold {ours_tokens:,})")
    print(f"{'':<34} {'MB/s':>8}")
    print(f"{'tokenizers encode_batch (ids)':<34} {mb / best_lib:>8.2f}")
    print(f"{'tokenize stage (write_shard)':<34} {mb / best_ours:>8.2f}")
    print(f"ratio stage / library: {best_lib / best_ours:.2f}x (target >= 0.8x)")


def _write_corpus(folder: Path, total: int) -> None:
    folder.mkdir(parents=True)
    base = "".join(_docs(32 << 20))
    part, written = 0, 0
    while written < total:
        size = min(64 << 20, total - written)
        reps = -(-size // len(base))
        text = (f"# part {part}\n" + base * reps)[:size]
        Path(folder, f"part-{part:03d}.txt").write_text(text)
        written += size
        part += 1


def _child(cfg: dict, **extra_env: str) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "LADDER_PEAK_FLOPS": os.environ.get("LADDER_PEAK_FLOPS", "1e11"),
           **extra_env}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True, env=env,
                          timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"training child failed: {proc.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def memory() -> None:
    from ladder.dag.tokenize import tokenize
    from ladder.spec import DataSpec, DomainSpec, ModelSpec, OptimSpec, RungSpec, ScheduleSpec, to_dict

    rung = RungSpec(name="m", model=ModelSpec(d_model=64, n_layers=2, n_heads=4), tokens=40 * 16 * 128,
                    batch_size=16, seq_len=128, seed=0, n_evals=2, optim=OptimSpec(lr=3e-3),
                    schedule=ScheduleSpec(kind="wsd", warmup_steps=2))
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("LADDER_BENCH_TMP")) as tmp:
        for label, size in (("1/20", BIG_BYTES // 20), ("full", BIG_BYTES)):
            corpus = Path(tmp, f"corpus-{label.replace('/', '_')}")
            _write_corpus(corpus, size)
            shards = Path(tmp, f"shards-{label.replace('/', '_')}")
            t0 = time.perf_counter()
            tokenize({"domain": "c", "source": str(corpus), "tokenizer": "bytes", "heldout_frac": 0.01,
                      "format": 1, "shard_bytes": 64 << 20}, str(shards))
            tok_s = time.perf_counter() - t0
            data = DataSpec(domains=(DomainSpec("c", str(corpus)),), heldout_frac=0.01, eval_tokens=4096)
            res = _child({"rung": to_dict(rung), "data": to_dict(data), "out": str(Path(tmp, f"run-{label[-4:]}")),
                          "shards": {"c": str(shards)}})
            rows.append((f"shards, corpus {label}", size, res["peak_rss_anon"], tok_s))
            if label == "1/20":
                mem = _child({"rung": to_dict(rung), "data": to_dict(data), "out": str(Path(tmp, "run-inmem"))})
                rows.append(("in-memory (bytes), corpus 1/20", size, mem["peak_rss_anon"], None))
            for p in corpus.iterdir():
                p.unlink()
    print(f"{'training process':<32} {'corpus GB':>10} {'peak RssAnon MB':>16} {'tokenize s':>11}")
    for label, size, peak, tok_s in rows:
        print(f"{label:<32} {size / (1 << 30):>10.3f} {peak / 1e6:>16.1f} {tok_s if tok_s is not None else float('nan'):>11.1f}")
    small = next(r for r in rows if r[0] == "shards, corpus 1/20")[2]
    full = next(r for r in rows if r[0] == "shards, corpus full")[2]
    print(f"peak RssAnon full / 1/20: {full / small:.2f}x (target within 1.2x)")


def speed() -> None:
    from ladder.dag.tokenize import tokenize
    from ladder.spec import load_spec, to_dict

    spec = load_spec(Path(__file__).resolve().parents[1] / "experiments" / "tiny.py")
    rung = max(spec.rungs, key=lambda r: r.flops)
    steps = int(os.environ.get("LADDER_BENCH_SPEED_STEPS", "40"))
    with tempfile.TemporaryDirectory() as tmp:
        shards = {}
        for dom in spec.data.domains:
            shards[dom.name] = str(Path(tmp, f"shards-{dom.name}"))
            tokenize({"domain": dom.name, "source": dom.source, "tokenizer": "bytes",
                      "heldout_frac": spec.data.heldout_frac, "format": 1, "shard_bytes": 64 << 20}, shards[dom.name])
        base = {"rung": to_dict(rung), "data": to_dict(spec.data), "max_steps": steps}
        results = {"in-memory": [], "shards": []}
        # 8 steps a jitted call, so the steps after the first (compiling) call are timed in several calls
        for r in range(3):  # alternating, best of 3 each: the machine is shared
            results["in-memory"].append(_child({**base, "out": str(Path(tmp, f"mem{r}"))},
                                               LADDER_STEPS_PER_CALL="8")["tokens_per_s"])
            results["shards"].append(_child({**base, "out": str(Path(tmp, f"sh{r}")), "shards": shards},
                                            LADDER_STEPS_PER_CALL="8")["tokens_per_s"])
    per_step = rung.batch_size * rung.seq_len
    print(f"{rung.name} of experiments/tiny.py (d_model {rung.model.d_model}, batch {rung.batch_size} x {rung.seq_len}), "
          f"{steps} steps, load average {os.getloadavg()[0]:.1f}")
    for name, vals in results.items():
        print(f"{name:<12} {max(vals) / per_step:>8.2f} steps/s")
    print(f"shards / in-memory: {max(results['shards']) / max(results['in-memory']):.2f}x (target >= 1.0x, no slower)")


def main() -> None:
    throughput()
    print()
    memory()
    print()
    speed()


if __name__ == "__main__":
    main()
