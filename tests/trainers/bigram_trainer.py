"""A genuine foreign trainer of the contract (docs/trainers.md), standard library and numpy only: a
byte-level bigram language model (a 256 x 256 table of logits) trained by AdamW with the run's own
schedule on the run's own data (each domain a file or folder of text), evaluated on the held-out tail
of each domain, checkpointed and resumed to the bit, its rows written through ladder/trainers/writer.py
imported as a vendored file (no ``ladder`` import).

As a command: ``python bigram_trainer.py --config run.json`` (SIGTERM: checkpoint, exit 143). As a callable:
``bigram_trainer:train`` (``train(run, should_stop)``). In a gang (``WORLD_SIZE`` > 1) each process takes its
share of every batch's rows and the gradients are summed over the processes through rank 0
(``MASTER_ADDR``:``MASTER_PORT``, plain sockets): the global batch's step, as one process takes it.

``BIGRAM_FAULT`` makes it misbehave the ways the step must report, for the tests: ``exit3`` (writes two
lines to standard error at step 3 and exits 3), ``no_final`` (skips its final eval, exits 0), ``bad_row`` (a
metrics line that is not JSON after step 3).
"""

from __future__ import annotations

import math
import os
import signal
import socket
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ladder" / "trainers"))
from writer import RunWriter, lr_at, read_run  # noqa: E402  (the vendored file, as a lab would copy it)

sys.path.pop(0)
V = 256


def _text(source: str) -> bytes:
    p = Path(source)
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in (".py", ".md", ".txt")) if p.is_dir() else [p]
    return b"\n".join(f.read_bytes() for f in files)


def _splits(run: dict) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(train bytes, held-out bytes, weight) of each domain: the held-out split is each text's tail."""
    out = []
    for d in run["data"]["domains"]:
        b = np.frombuffer(_text(d["source"]), np.uint8).astype(np.int64)
        cut = int(len(b) * (1 - run["data"]["heldout_frac"]))
        out.append((b[:cut], b[cut:], float(d["weight"])))
    return out


def _batch(domains, run: dict, step: int) -> np.ndarray:
    """Step ``step``'s windows (batch, seq + 1): a function of the seed and the step alone, so a resumed run
    reads the batches an uninterrupted one does."""
    rng = np.random.default_rng([run["seed"], step])
    w = np.array([d[2] for d in domains])
    which = rng.choice(len(domains), size=run["batch_size"], p=w / w.sum())
    seq = run["seq_len"]
    rows = []
    for k in which:
        text = domains[k][0]
        start = int(rng.integers(0, len(text) - seq - 1))
        rows.append(text[start : start + seq + 1])
    return np.stack(rows)


def _sums(W: np.ndarray, windows: np.ndarray) -> tuple[float, np.ndarray, int]:
    """(summed loss, summed gradient, tokens) over ``windows``."""
    x, y = windows[:, :-1].ravel(), windows[:, 1:].ravel()
    logits = W[x]
    logits = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = float(-np.log(p[np.arange(len(y)), y]).sum())
    p[np.arange(len(y)), y] -= 1.0
    g = np.zeros_like(W)
    np.add.at(g, x, p)
    return loss, g, len(y)


def _loss_grad(W: np.ndarray, windows: np.ndarray) -> tuple[float, np.ndarray]:
    loss, g, n = _sums(W, windows)
    return loss / n, g / n


class Gang:
    """Sums arrays over the processes of a gang: every rank sends its array to rank 0, which adds them in
    rank order and sends the sum back (a gather and a broadcast over TCP)."""

    def __init__(self):
        self.rank, self.world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
        if self.world == 1:
            return
        addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
        if self.rank == 0:
            server = socket.create_server(("", addr[1]))
            self.peers = {}
            for _ in range(self.world - 1):
                conn, _ = server.accept()
                self.peers[int(self._recv(conn, 8).decode())] = conn
            server.close()
            return
        for _ in range(600):  # rank 0 may not listen yet: a connection refused is retried
            try:
                self.conn = socket.create_connection(addr)
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        self.conn.sendall(f"{self.rank:08d}".encode())

    @staticmethod
    def _recv(conn, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("a process of the gang went away")
            buf += chunk
        return bytes(buf)

    def sum(self, a: np.ndarray) -> np.ndarray:
        if self.world == 1:
            return a
        if self.rank != 0:
            self.conn.sendall(a.tobytes())
            return np.frombuffer(self._recv(self.conn, a.nbytes), a.dtype).reshape(a.shape)
        total = a.copy()
        for r in sorted(self.peers):
            total += np.frombuffer(self._recv(self.peers[r], a.nbytes), a.dtype).reshape(a.shape)
        for conn in self.peers.values():
            conn.sendall(total.tobytes())
        return total


def _eval(W: np.ndarray, domains, run: dict, tokens: int) -> dict:
    row, total = {}, 0.0
    seq = run["seq_len"]
    wsum = sum(d[2] for d in domains)
    for d, (_, held, weight) in zip(run["data"]["domains"], domains, strict=True):
        n = max(1, min(tokens // seq, (len(held) - 1) // seq))
        starts = np.linspace(0, len(held) - seq - 1, n).astype(int)
        windows = np.stack([held[s : s + seq + 1] for s in starts])
        loss, _ = _loss_grad(W, windows)
        row[f"eval_loss/{d['name']}"] = loss
        row[f"bpb/{d['name']}"] = loss / math.log(2)  # one byte a token
        total += weight / wsum * loss
    row["bpb"] = total / math.log(2)
    return {"eval_loss": total, **row}


def _ckpt_path(run: dict, step: int) -> Path:
    return Path(run["checkpoint"]["dir"]) / f"step-{step:08d}.npz"


def _save(run: dict, step: int, state: dict) -> None:
    folder = Path(run["checkpoint"]["dir"])
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".step-{step:08d}.tmp.npz"
    np.savez(tmp, step=step, **state)
    os.replace(tmp, _ckpt_path(run, step))
    for old in sorted(folder.glob("step-*.npz"))[:-2]:
        old.unlink()


def _restore(run: dict) -> tuple[int, dict | None]:
    folder = Path(run["checkpoint"]["dir"])
    for path in sorted(folder.glob("step-*.npz"), reverse=True) if folder.exists() else ():
        with np.load(path) as z:
            return int(z["step"]), {k: z[k].copy() for k in ("W", "m", "v")}
    return 0, None


def train(run: dict, should_stop=lambda: False) -> int:
    """Train ``run`` to its end or until ``should_stop()``; the step reached."""
    fault = os.environ.get("BIGRAM_FAULT", "")
    domains = _splits(run)
    opt = run["optimizer"]
    start, state = _restore(run)
    if state is None:
        rng = np.random.default_rng(run["seed"])
        state = {"W": rng.normal(0, 0.02, (V, V)), "m": np.zeros((V, V)), "v": np.zeros((V, V))}
    W, m, v = state["W"], state["m"], state["v"]
    steps, log_every = run["steps"], run["log_every"]
    evals, ckpts = set(run["eval"]["steps"]), set(run["checkpoint"]["steps"])
    gang = Gang()
    with RunWriter(run, resume_step=start) as out:
        interval = []
        for step in range(start + 1, steps + 1):
            mine = _batch(domains, run, step)[gang.rank :: gang.world]
            loss_sum, g, n = _sums(W, mine)
            # a stop asked of any process stops all of them at this step (each is asked on its own)
            flat = gang.sum(np.concatenate([g.ravel(), [loss_sum, n, float(should_stop())]]))
            g, loss = flat[:-3].reshape(W.shape) / flat[-2], float(flat[-3] / flat[-2])
            norm = float(np.sqrt((g * g).sum()))
            if opt["grad_clip"] and norm > opt["grad_clip"]:
                g = g * (opt["grad_clip"] / norm)
            lr = lr_at(run["lr_schedule"], step - 1)
            m = opt["b1"] * m + (1 - opt["b1"]) * g
            v = opt["b2"] * v + (1 - opt["b2"]) * g * g
            mhat, vhat = m / (1 - opt["b1"] ** step), v / (1 - opt["b2"] ** step)
            W = W - lr * (mhat / (np.sqrt(vhat) + opt["eps"]) + opt["weight_decay"] * W)
            interval.append(loss)
            if step % log_every == 0 or step == steps:
                # pid: which process trained it (a command's own, a callable's step worker), for the tests
                out.metrics(step, loss, loss_mean=sum(interval) / len(interval), lr=lr, grad_norm=norm, pid=os.getpid())
                interval = []
            if fault == "exit3" and step == 3:
                print("bigram: a fault asked for at step 3", file=sys.stderr)
                print("bigram: exiting with status 3", file=sys.stderr, flush=True)
                sys.exit(3)
            if fault == "bad_row" and step == 3:
                with open(Path(run["out_dir"]) / "metrics.jsonl", "a") as fh:
                    fh.write("step 3 loss nan {\n")
            if step in evals and not (fault == "no_final" and step == steps):
                out.eval(step, **_eval(W, domains, run, run["eval"]["tokens_per_domain"]))
            stopping = step < steps and flat[-1] > 0
            if (step in ckpts or step == steps or stopping) and gang.rank == 0:
                _save(run, step, {"W": W, "m": m, "v": v})
            if stopping:
                return step
        if run["eval"]["final_tokens_per_domain"] != run["eval"]["tokens_per_domain"] and fault != "no_final":
            out.final_eval(steps, **_eval(W, domains, run, run["eval"]["final_tokens_per_domain"]))
    return steps


def main() -> None:
    config = sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else None
    run = read_run(config)
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("flag", True))
    reached = train(run, lambda: stop["flag"])
    if reached < run["steps"]:
        print(f"bigram: checkpointed at step {reached} on SIGTERM", file=sys.stderr, flush=True)
        sys.exit(128 + signal.SIGTERM)


if __name__ == "__main__":
    main()
