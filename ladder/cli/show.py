"""`ladder show SPEC` (the resolved spec, field by field, with meaning and default) and
`ladder env` (the environment variables `ladder` reads). Base install: no training stack needed.
"""

from __future__ import annotations

import dataclasses
import json

import click

from ladder.cli.options import ENVIRONMENT, example, json_option, root_option


def _walk(obj, path: str):
    """(path, class, row) for every field of a spec object, nested specs and tuples of them included."""
    from ladder.spec.docs import field_docs

    for row in field_docs(type(obj)):
        value = getattr(obj, row["field"])
        here = f"{path}.{row['field']}" if path else row["field"]
        nested = dataclasses.is_dataclass(value) and not isinstance(value, type)
        items = value if isinstance(value, tuple) and value and all(dataclasses.is_dataclass(v) for v in value) else ()
        if nested:
            yield here, type(obj), row, value, "nested"
            yield from _walk(value, here)
        elif items:
            yield here, type(obj), row, value, "list"
            for i, item in enumerate(items):
                key = getattr(item, "name", i)
                yield from _walk(item, f"{here}[{key}]")
        else:
            yield here, type(obj), row, value, "value"


def _plain(value):
    from ladder.spec import to_dict

    return to_dict(value) if dataclasses.is_dataclass(value) or isinstance(value, tuple) else value


@click.command("show", epilog=example(
    "ladder show experiments/tiny.py",
    "ladder show experiments/tiny.py --set fit.level=0.8 --changed",
    "ladder show experiments/marin_moe_535b.py --json",
))
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@root_option
@click.option("--changed", is_flag=True, help="Only the fields whose value differs from the default.")
@json_option
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a spec field, e.g. --set seed=3 (repeatable).")
@click.option("--variant", default=None, metavar="NAME", help="Show the spec's variant NAME (LadderSpec.variants).")
def show(spec_path, root, changed, as_json, overrides, variant):
    """The resolved spec: every field's value, its default and what it means (rules resolved, --set applied)."""
    from ladder.spec import load_spec

    spec = load_spec(spec_path, overrides, variant=variant)
    if root is not None:
        spec = dataclasses.replace(spec, root=root)
    rows = []
    for path, cls, row, value, kind in _walk(spec, ""):
        is_default = row["default"] != "required" and _plain(row["default"]) == _plain(value)
        if changed and (is_default or kind != "value"):
            continue
        rows.append({"path": path, "class": cls.__name__, "kind": kind, "value": _plain(value),
                     "default": None if row["default"] == "required" else _plain(row["default"]),
                     "required": row["default"] == "required", "is_default": is_default, "doc": row["doc"]})
    if as_json:
        click.echo(json.dumps({"ladder": spec.name, "spec": str(spec_path), "fields": rows}, default=str))
        return 0
    from ladder.spec.docs import default_text

    for r in rows:
        if r["kind"] != "value":
            click.echo(f"{r['path']}: {r['doc']}")
            continue
        mark = "" if r["is_default"] else ("  (required)" if r["required"] else
                                           f"  (default {default_text(r['default'], 40)})")
        click.echo(f"  {r['path']} = {default_text(r['value'], 60)}{mark}  # {r['doc']}")
    return 0


@click.command("env", epilog=example("ladder env", "ladder env --json"))
@json_option
def env_cmd(as_json):
    """The environment variables `ladder` reads, what each does, and its value here."""
    import os

    rows = [{"name": k, "doc": v, "value": os.environ.get(k)} for k, v in ENVIRONMENT.items()]
    if as_json:
        click.echo(json.dumps({"variables": rows}))
        return 0
    for r in rows:
        click.echo(f"{r['name']:<26} {'(unset)' if r['value'] is None else r['value']!r}\n    {r['doc']}")
    return 0

