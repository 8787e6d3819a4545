"""Reading an offline W&B run's file back, for the tests that check what the trainer logged to W&B."""

from __future__ import annotations

import json
import struct
from pathlib import Path


def read_wandb_history(path: Path) -> list[dict]:
    """History rows of an offline run's .wandb file (LevelDB-log framing of protobuf Records)."""
    from wandb.proto import wandb_internal_pb2 as pb

    b = path.read_bytes()
    assert b[:4] == b":W&B"
    pos, block, buf, recs = 7, 32768, b"", []
    while pos + 7 <= len(b):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _crc, ln, typ = struct.unpack("<IHB", b[pos:pos + 7])
        pos += 7
        if typ == 0 and ln == 0:
            break
        data, pos = b[pos:pos + ln], pos + ln
        if typ == 1:
            recs.append(data)
        elif typ == 2:
            buf = data
        elif typ == 3:
            buf += data
        elif typ == 4:
            recs.append(buf + data)
    rows = []
    for d in recs:
        rec = pb.Record()
        rec.ParseFromString(d)
        if rec.WhichOneof("record_type") == "history":
            rows.append({(it.key or "/".join(it.nested_key)): json.loads(it.value_json) for it in rec.history.item})
    return rows
