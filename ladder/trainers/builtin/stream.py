"""Training and eval data read from token shards (ladder.trainers.builtin.shards) through np.memmap.

A process maps its shards instead of loading the corpus: its own memory holds the batch being built,
never the corpus (the mapped pages are the OS's page cache). Batches and eval windows are drawn as for
every tokenizer (ladder.trainers.builtin.mixture).
"""

from __future__ import annotations

from collections.abc import Mapping

from ladder.spec import DataSpec
from ladder.trainers.builtin.data import DataError, Mixture
from ladder.trainers.builtin.mixture import SplitDomain, WindowMixture
from ladder.trainers.builtin.shards import open_split


class ShardMixture(WindowMixture):
    """The run's data from each domain's token shards (``shard_dirs``: domain name -> its tokenize step's
    folder)."""

    def __init__(self, data: DataSpec, seq_len: int, seed: int, shard_dirs: Mapping[str, str]):
        domains: list[SplitDomain] = []
        vocab_size = 0
        for dom in data.domains:
            if dom.name not in shard_dirs:
                raise DataError(f"data.domains[{dom.name}]: no token shards for it; run the ladder (ladder submit) "
                                "so its tokenize step writes them")
            label = f"tokenize {dom.name}"
            train, manifest = open_split(shard_dirs[dom.name], "train", seq_len, label)
            held, _ = open_split(shard_dirs[dom.name], "heldout", seq_len, label)
            vocab_size = max(vocab_size, int(manifest["tokenizer"]["vocab_size"]))
            for split, part in (("train", train), ("held-out", held)):
                if part.n_windows < 1:
                    raise DataError(f"data.domains[{dom.name}]: its {split} split has {part.n_tokens} tokens, fewer "
                                    f"than one sequence of {seq_len + 1} in a shard; add text or lower seq_len")
            domains.append(SplitDomain(dom.name, float(dom.weight), train, held))
        super().__init__(data, seq_len, seed, domains, vocab_size)


def open_mixture(data: DataSpec, seq_len: int, seed: int, shard_dirs=None):
    """The run's data: token shards when its tokenize steps wrote them, else the ``bytes`` tokenizer's
    streams in memory (the same sampler and windows over either)."""
    from ladder.trainers.builtin.tokenizer import declared_refusal, declared_vocab

    if declared_vocab(data.tokenizer) is not None:
        raise DataError(declared_refusal(data.tokenizer, "a run"))
    if shard_dirs:
        return ShardMixture(data, seq_len, seed, shard_dirs)
    if data.tokenizer != "bytes":
        raise DataError(f"data.tokenizer: {data.tokenizer} trains from token shards; run the ladder (ladder submit) "
                        "so its tokenize steps write them")
    return Mixture(data, seq_len, seed)
