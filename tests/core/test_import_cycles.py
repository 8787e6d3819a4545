"""No import circle in ladder/ or fits/: every import between their modules, at the top of a module or
inside a function, read from the source (ast), without importing anything.

A circle means two modules that cannot be read, tested or moved apart; an import inside a function
hides one from Python but not from a reader, so both count. Imports under ``if TYPE_CHECKING:`` do
not (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ladder", "fits")


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    stack: list[ast.AST] = [ast.parse(path.read_text(), str(path))]
    while stack:
        node = stack.pop()
        if _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                out.add(submodule if submodule in known else base)
        stack.extend(ast.iter_child_nodes(node))
    return {m for m in out if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_ladder_or_fits():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert "ladder.cli.main" in graph and graph["ladder.cli.main"], "the walk found no imports"
    assert cycles(graph) == []


# Arrows that would run up the layers (docs/architecture.md): the package on the left never imports those on
# the right, at the top of a module or inside a function. The file readers below the dashboard and the report
# do not reach into them; what builds the DAG does not print through the command line; the trainers do not
# know the DAG that runs them (the step hands them a TrainRun).
NEVER_IMPORTS = {
    "ladder.outputs": ("ladder.dashboard", "ladder.report", "ladder.cli"),
    "ladder.dag": ("ladder.cli",),
    "ladder.trainers": ("ladder.dag", "ladder.cli", "ladder.dashboard", "ladder.report"),
}


def test_no_import_runs_up_the_layers():
    known = modules()
    upward = []
    for name, path in known.items():
        for low, above in NEVER_IMPORTS.items():
            if name == low or name.startswith(low + "."):
                upward += [f"{name} imports {m}" for m in sorted(imports(name, path, known))
                           if any(m == a or m.startswith(a + ".") for a in above)]
    assert upward == []


def test_fits_imports_no_private_name_of_another_module():
    private = []
    for path in sorted((ROOT / "fits").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fits"):
                private += [f"{path.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert private == []
