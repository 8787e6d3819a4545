"""ladder/outputs/layout.py readers: a half-written tail is skipped quietly, damage in the middle is reported."""

from __future__ import annotations

import warnings

import pytest

from ladder.outputs.layout import CorruptLineWarning, iter_jsonl, read_json, write_json_atomic


def test_truncated_last_line_is_skipped_without_warning(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.9}\n{"step": 3, "lo')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = list(iter_jsonl(path))
    assert [r["step"] for r in rows] == [1, 2]


def test_garbled_middle_line_is_reported(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n\x00\x00garbage\n{"step": 3}\n')
    with pytest.warns(CorruptLineWarning, match=r"metrics.jsonl:2: corrupt line"):
        rows = list(iter_jsonl(path))
    assert [r["step"] for r in rows] == [1, 3]


def test_json_written_atomically_and_half_files_read_as_default(tmp_path):
    path = tmp_path / "result.json"
    write_json_atomic(path, {"a": 1})
    assert read_json(path) == {"a": 1}
    path.write_text('{"a": ')
    assert read_json(path, default="missing") == "missing"
    assert not list(tmp_path.glob(".result.json.*"))
