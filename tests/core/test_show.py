"""`ladder show SPEC` prints every field of the resolved spec with its meaning (docs/spec.md, the same
meanings as a page, is checked in test_docs.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from click.testing import CliRunner

from ladder.cli.main import main
from ladder.spec import load_spec
from ladder.spec.docs import field_docs, spec_classes

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "experiments" / "tiny.py")


def test_every_field_of_every_spec_class_has_a_meaning():
    missing = [f"{cls.__name__}.{r['field']}" for cls in spec_classes() for r in field_docs(cls) if not r["doc"]]
    assert missing == [], "add them to ladder.spec.docs.FIELD_DOCS (or a comment on the field's line)"


def _leaf_paths(obj, path=""):
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        here = f"{path}.{f.name}" if path else f.name
        if dataclasses.is_dataclass(value):
            yield from _leaf_paths(value, here)
        elif isinstance(value, tuple) and value and all(dataclasses.is_dataclass(v) for v in value):
            for i, item in enumerate(value):
                yield from _leaf_paths(item, f"{here}[{getattr(item, 'name', i)}]")
        else:
            yield here


def test_show_prints_every_field_of_the_tiny_ladder():
    spec = load_spec(TINY)
    leaves = list(_leaf_paths(spec))
    r = CliRunner().invoke(main, ["show", TINY])
    assert r.exit_code == 0, r.stderr
    shown = {line.split(" = ")[0].strip() for line in r.stdout.splitlines() if " = " in line}
    assert set(leaves) <= shown, sorted(set(leaves) - shown)[:5]
    assert len(leaves) > 300  # ten rungs and a hero, each with its model, optimizer, schedule, resources
    r = CliRunner().invoke(main, ["show", TINY, "--json", "--set", "fit.level=0.8"])
    d = json.loads(r.stdout)
    level = next(f for f in d["fields"] if f["path"] == "fit.level")
    assert level["value"] == 0.8 and level["default"] == 0.9 and not level["is_default"] and level["doc"]
    r = CliRunner().invoke(main, ["show", TINY, "--changed", "--set", "fit.level=0.8"])
    assert "fit.level = 0.8  (default 0.9)" in r.stdout
    assert not any(line.strip().startswith("fit.bootstrap") for line in r.stdout.splitlines())

