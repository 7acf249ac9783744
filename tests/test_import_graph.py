"""The package's import graph has no cycle, its packages stand in layers, and in-function imports are kept for
heavy dependencies only.

Every `import` and `from ... import` of an advisor module, at module level and inside functions (and under ``if
TYPE_CHECKING``), is an edge; so is the package ``__init__`` each import runs first (importing
``advisor.service.process.config`` runs ``advisor/service/__init__.py``), except the importer's own packages, which are
already being imported. A strongly connected component of more than one module fails the test and names its
modules. Outside the command line (whose commands import on use so that ``--help`` stays fast), an import inside a
function is allowed for a third-party library only, or with a comment above it saying why (``# heavy ...`` or
``# lazy ...``).

The layers, lowest first (`LAYERS`; docs/extending.md shows the same table). A module may import its own layer
and the layers below it, never one above, and no two packages import each other (through any chain):

1. foundations: errors, env_limits, registry, nesting, yamlio, strict, money, jsonout, records, scores, shares,
   suite_validation, version, redaction, toolcalls (the tool-call formats' registry; the formats register
   from `agent`);
2. backends: what reaches outside the process: backends, triton (the Triton client, its backend, the embedded
   server), store, tools (the sandboxed environment);
3. agent: ladder, checks, suite, skipped, agent, verifier, importers;
4. probe and router: standin, orchestrator, probe, router, plans, floors;
5. service;
6. report;
7. cli and the package root ``advisor`` (its ``__init__`` re-exports the public names).

A string that names one of the package's modules (a registry's built-ins, an ``importlib.import_module``
argument) is an edge like an import: it is loaded at run time. So a lower layer reaches a higher one only the
way an outside package would: an entry point in pyproject.toml that a registry loads on its first lookup (the
tool-call formats, the Triton backend, the stand-in responders, the orchestrator's routing policy).
"""

from __future__ import annotations

import ast
import sys
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
    found = {m for m in found if m and m != module}
    own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)}
    parents = {".".join(m.split(".")[:i]) for m in found for i in range(1, m.count(".") + 1)}
    return found | {p for p in parents if p in known and p not in own}


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


def string_loads(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `module` names in a string of its own (a registry's built-ins, an
    ``importlib.import_module`` argument): loaded at run time, so edges like imports."""
    return {node.value for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known
            and node.value != module and "." in node.value}


def import_graph(root: Path = PACKAGE, strings: bool = True) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, and with `strings` those it names in a string (`string_loads`:
    layers and packages count them; the module cycle check does not, since a registry names the modules of its
    own package that register into it)."""
    known = modules(root)
    return {m: imported(m, p, known) | (string_loads(m, p, known) if strings else set()) for m, p in known.items()}


#: Packages (the first name under ``advisor``) by layer, lowest first; see the module docstring.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundations", ("errors", "env_limits", "registry", "nesting", "yamlio", "strict", "money", "jsonout", "records",
                     "scores", "shares", "suite_validation", "version", "toolcalls", "redaction")),
    ("backends", ("backends", "triton", "store", "tools")),
    ("agent", ("ladder", "checks", "suite", "skipped", "agent", "verifier", "importers")),
    ("probe and router", ("standin", "orchestrator", "probe", "router", "plans", "floors")),
    ("service", ("service",)),
    ("report", ("report",)),
    ("cli", ("cli", "")),  # "": the package root, advisor/__init__.py
]


def package_of(module: str) -> str:
    """The package a module belongs to: its first name under the root (``""`` for the root itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Package -> the other packages its modules import."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = package_of(module)
        out.setdefault(mine, set()).update(package_of(t) for t in targets if package_of(t) != mine)
    return out


def upward_imports(graph: dict[str, set[str]], layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """Every import from a module into a higher layer, and every package no layer names, as messages."""
    rank = {pkg: i for i, (_, pkgs) in enumerate(layers) for pkg in pkgs}
    out = sorted({f"{package_of(m) or '(root)'} is in no layer: add it to LAYERS" for m in graph
                  if package_of(m) not in rank})
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = rank.get(package_of(module)), rank.get(package_of(target))
            if a is not None and b is not None and b > a:
                out.append(f"{module} ({layers[a][0]}) imports {target} ({layers[b][0]})")
    return out


def in_function_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, imported module, the line above its block) of every import inside a function of the file; a block
    is a run of import statements on consecutive lines, which one comment above it covers."""
    lines = path.read_text().splitlines()
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                found.append(child)
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    walk(ast.parse("\n".join(lines)), False)
    ends = {n.end_lineno: n for n in found}
    out = []
    for node in found:
        first = node
        while first.lineno - 1 in ends:
            first = ends[first.lineno - 1]
        name = node.names[0].name if isinstance(node, ast.Import) else "." * node.level + (node.module or "")
        out.append((node.lineno, name, lines[first.lineno - 2] if first.lineno > 1 else ""))
    return out


def test_in_function_imports_are_for_heavy_dependencies_only():
    bad = []
    for module, path in modules().items():
        if module.startswith("advisor.cli"):
            continue
        for line, name, above in in_function_imports(path):
            if "# heavy" in above or "# lazy" in above:
                continue
            top = name.split(".")[0]
            own = top == "advisor" or name.startswith(".") or top in sys.stdlib_module_names
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
                       + ("" if own else " (third-party: say which heavy dependency in a comment above)"))
    assert not bad, "move these imports to the top of their module, or say why not:\n" + "\n".join(bad)


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph(strings=False))
    assert not found, "import cycles (extract the layer the modules share):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_import_runs_up_a_layer():
    found = upward_imports(import_graph())
    assert not found, "imports into a higher layer (move the code down, or reach it through a registry):\n" + \
        "\n".join(found)


def test_no_two_packages_import_each_other():
    found = cycles(package_graph(import_graph()))
    assert not found, "package cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_layer_check_fails_on_an_upward_import_and_an_unplaced_package(tmp_path):
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", "low/__init__.py": "", "low/a.py": "from pkg.high import b\n",
                       "high/__init__.py": "", "high/b.py": "", "stray.py": "from pkg.low import a\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    found = upward_imports(import_graph(root), [("low", ("low",)), ("high", ("high", ""))])
    assert found == ["stray is in no layer: add it to LAYERS", "pkg.low.a (low) imports pkg.high (high)",
                     "pkg.low.a (low) imports pkg.high.b (high)"]
    assert cycles(package_graph(import_graph(root))) == []


def test_a_module_named_in_a_string_is_an_edge_like_an_import(tmp_path):
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", "low/__init__.py": "", "high/__init__.py": "",
                       "low/registry.py": "BUILTINS = ('pkg.high.parts', 'pkg.low.own', 'pkg.nothing')\n",
                       "low/own.py": "", "high/parts.py": "from pkg.low import registry\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    found = upward_imports(import_graph(root), [("low", ("low",)), ("high", ("high", ""))])
    assert found == ["pkg.low.registry (low) imports pkg.high.parts (high)"]
    assert cycles(package_graph(import_graph(root))) == [["high", "low"]]


@pytest.mark.parametrize("files, expected", [
    ({"a.py": "from pkg import b\n", "b.py": "def f():\n    from pkg.a import x\n"}, [["pkg.a", "pkg.b"]]),
    ({"a.py": "import pkg.b\n", "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n",
      "c.py": "from .a import x\n"}, [["pkg.a", "pkg.b", "pkg.c"]]),
    ({"a.py": "from pkg import b\n", "b.py": "x = 1\n"}, []),
    ({"sub/__init__.py": "from pkg.sub.c import x\n", "sub/c.py": "from pkg.a import y\n",
      "a.py": "def f():\n    import pkg.sub.d\n", "sub/d.py": ""}, [["pkg.a", "pkg.sub", "pkg.sub.c"]]),
])
def test_cycles_are_found_in_function_relative_and_type_checking_imports(tmp_path, files, expected):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)
    assert cycles(import_graph(root)) == expected


def test_importing_a_foundation_module_loads_only_what_it_needs():
    """The package root imports its public names on first use: ``import advisor.errors`` loads no store, ladder or
    suite."""
    import subprocess

    code = "import sys, advisor.errors; print(' '.join(sorted(m for m in sys.modules if m.startswith('advisor'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["advisor", "advisor.errors", "advisor.version"]
    code = "import advisor; print(advisor.Store.__module__, advisor.load_suite.__module__, 'Store' in dir(advisor))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["advisor.store._store", "advisor.suite", "True"]


def subpackage_graph(graph: dict[str, set[str]], root: Path = PACKAGE) -> dict[str, set[str]]:
    """Sub-package (``advisor.router.training``) -> the other sub-packages of its package its modules import."""
    subs = {".".join([root.name, *p.relative_to(root).parts]) for p in root.glob("*/*")
            if p.is_dir() and (p / "__init__.py").exists()}

    def sub(module: str) -> str | None:
        name = ".".join(module.split(".")[:3])
        return name if name in subs else None

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = sub(module)
        if mine is not None:
            out.setdefault(mine, set()).update(t for t in map(sub, targets) if t is not None and t != mine)
    return out


def test_no_two_subpackages_import_each_other():
    found = cycles(subpackage_graph(import_graph()))
    assert not found, "sub-package cycles (move what both use into the lower one):\n" + "\n".join(
        " <-> ".join(c) for c in found)


#: The routing service's sub-packages, lowest first (advisor/service/__init__.py and docs/service.md say the same).
SERVICE_ORDER = ["api", "checks", "sessions", "routing", "records", "process", "http"]


def test_the_service_sub_packages_stand_in_order_and_its_modules_stay_short():
    """A service sub-package imports only those before it in `SERVICE_ORDER` (`launch`, at the top, may import
    any); every service module is under 450 lines; the package's docstring lists the sub-packages in that order."""
    rank = {f"advisor.service.{name}": i for i, name in enumerate(SERVICE_ORDER)}
    service = PACKAGE / "service"
    assert sorted(p.name for p in service.iterdir() if (p / "__init__.py").exists()) == sorted(SERVICE_ORDER)
    subs = subpackage_graph(import_graph())
    upward = [f"{sub} imports {other}" for sub, others in sorted(subs.items()) if sub in rank
              for other in sorted(others) if rank.get(other, -1) > rank[sub]]
    assert not upward, "\n".join(upward)
    long = [f"{p.relative_to(PACKAGE.parent)}: {n} lines" for p in sorted(service.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) >= 450]
    assert not long, "split these modules by concept:\n" + "\n".join(long)
    doc = (service / "__init__.py").read_text()
    assert sorted(SERVICE_ORDER, key=lambda name: doc.index(f"`{name}`")) == SERVICE_ORDER
