"""The package's import graph has no cycle: every `import` and `from ... import` of an advisor module, at module
level and inside functions (and under ``if TYPE_CHECKING``), is an edge; a strongly connected component of more
than one module fails the test and names its modules. The CLI's command modules are included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "advisor"


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is its ``__init__``)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `module` imports anywhere in its file."""
    package = module.split(".")[0]
    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([base] if base else [])])
            targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    found = {resolve(t) for t in targets if t == package or t.startswith(package + ".")}
    return {m for m in found if m and m != module}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    known = modules(root)
    return {m: imported(m, p, known) for m, p in known.items()}


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles (extract the layer the modules share):\n" + "\n".join(
        " <-> ".join(c) for c in found)


@pytest.mark.parametrize("files, expected", [
    ({"a.py": "from pkg import b\n", "b.py": "def f():\n    from pkg.a import x\n"}, [["pkg.a", "pkg.b"]]),
    ({"a.py": "import pkg.b\n", "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n",
      "c.py": "from .a import x\n"}, [["pkg.a", "pkg.b", "pkg.c"]]),
    ({"a.py": "from pkg import b\n", "b.py": "x = 1\n"}, []),
])
def test_cycles_are_found_in_function_relative_and_type_checking_imports(tmp_path, files, expected):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(text)
    assert cycles(import_graph(root)) == expected
