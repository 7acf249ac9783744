"""Static analysis: the path of the probe's ``config`` from `advisor.probe.session.run_probe` through the functions
of the ``advisor`` package it is passed on to (stdlib `ast` only; nothing is imported or run).

Run:  python benchmarks/config_path.py [--fields] [--json] [--root DIR] [--start MODULE:FUNCTION:PARAM] [--layers FILE]

What counts (read from the source, never executed):

- **Following.** In a function, the followed names are the parameter the config arrived in, every name bound to
  one of them or to ``replace(<followed>, ...)`` (``dataclasses.replace``), and a followed name rebound by any
  assignment (``config, line = without_code_tasks(config, suite)`` keeps following ``config``). A nested function
  (a closure) is part of the function that defines it: its reads and passes count there.
- **A pass** is a call with a followed name or a ``replace(<followed>, ...)`` as a positional or keyword argument.
  The callee is resolved inside the package: a function or class of the module, a nested function, a name
  imported (absolute imports, re-exports followed) from another module of the package, ``module.function``,
  ``self.method`` (the class and its package bases), ``Class.method``, and ``obj.method`` when ``obj``'s class is
  known from a parameter's annotation or from ``obj = Class(...)`` / ``obj = obj or Class(...)`` / ``with
  Class(...) as obj`` (so ``planner.start`` is `FullGridPlanner.start`, the default planner). A class called with
  the config is its ``__init__``. The walk continues from the callee's parameter that receives the argument
  (``*args`` / ``**kwargs`` when no named one does). Passing one of the config's fields (``f(config.url)``) is a
  read, not a pass. A call with the config that cannot be resolved into the package (``asdict(config)``, a
  callable held in a variable) is listed under its stop as "not followed"; so is the config stored in an
  attribute (``self.config = config``).
- **A stop** is one visit of a function, in call order (source order within a function), depth first; a function
  reached again with the same parameters is a stop again ("again") but is not walked twice. All the arguments of
  one call that carry the config are one pass to one stop.
- **Reads**: the attributes of a followed name a stop reads (``config.X``, ``getattr(config, "X")``), closures
  included.
- **A climb back** is a pass whose callee's file was visited earlier in the walk and is not the caller's file:
  the path re-enters a file it had left.
- **An upward pass** goes from a module to one in a higher package layer, by the layer table of
  ``tests/test_import_graph.py`` (``LAYERS``, read from that file's source).
- **Narrow stops** take the whole config, read one or two of its fields, and pass it nowhere: they could take
  those fields instead.
- ``--fields`` also follows the values taken from the config (``config.X``, ``config.X.get(...)``, a name bound
  to one, ``Path(<one>)`` and other calls outside the package on one, either branch of ``a if c else b``); their
  stops are marked ``~`` and have no reads.

Current figures, with the command: docs/figures.md ("The probe's config path").
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "advisor"
LAYERS_FILE = ROOT / "tests" / "test_import_graph.py"
START = "advisor.probe.session:run_probe:config"
REPLACE = {"replace", "dataclasses.replace"}

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def read_layers(path: Path = LAYERS_FILE) -> list[tuple[str, tuple[str, ...]]]:
    """The ``LAYERS`` table of the import-graph test, read from its source (the test needs pytest; this does not)."""
    for node in ast.parse(path.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "LAYERS" and node.value is not None:
            return [(name, tuple(pkgs)) for name, pkgs in ast.literal_eval(node.value)]
    raise ValueError(f"{path}: no LAYERS table")


@dataclass
class Func:
    """A function or method of the package."""

    qualname: str  #: dotted: module, then classes and enclosing functions
    module: str
    path: Path
    node: FunctionNode
    cls: str | None = None  #: qualname of the class for a method
    outer: Func | None = None  #: the enclosing function of a nested one

    @property
    def bound(self) -> bool:
        """A method called on an instance or class: its first parameter is not passed explicitly."""
        names = {d.id for d in self.node.decorator_list if isinstance(d, ast.Name)}
        return self.cls is not None and "staticmethod" not in names

    def param_for(self, position: int | None, keyword: str | None) -> str | None:
        """The parameter that receives a positional argument (`position`, counting explicit arguments) or a
        keyword argument."""
        a = self.node.args
        positional = [p.arg for p in [*a.posonlyargs, *a.args]][1 if self.bound else 0:]
        if keyword is not None:
            if keyword in positional or keyword in [p.arg for p in a.kwonlyargs]:
                return keyword
            return a.kwarg.arg if a.kwarg else None
        if position is not None and position < len(positional):
            return positional[position]
        return a.vararg.arg if a.vararg else None


@dataclass
class Class:
    qualname: str
    module: str
    node: ast.ClassDef
    methods: dict[str, Func] = field(default_factory=dict)


@dataclass
class Step:
    """One pass of the config from a caller to a callee."""

    caller: str
    callee: str
    line: int  #: in the caller's file
    caller_path: str
    callee_path: str
    climb: bool
    upward: bool


@dataclass
class Stop:
    """One visit of a function on the config's path."""

    qualname: str
    path: str  #: relative to the package root's parent
    param: str
    depth: int
    reads: list[str] = field(default_factory=list)
    not_followed: list[str] = field(default_factory=list)
    passes: int = 0
    repeated: bool = False
    whole: bool = True  #: False: the stop received a value taken from the config (`fields` mode)

    @property
    def narrow(self) -> bool:
        return (self.whole and not self.repeated and 0 < len(self.reads) <= 2 and not self.passes
                and not self.not_followed)


@dataclass
class Walk:
    """What `walk` found."""

    start: str
    stops: list[Stop]
    steps: list[Step]

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(s.path for s in self.stops))

    @property
    def climbs(self) -> list[Step]:
        return [s for s in self.steps if s.climb]

    @property
    def upward(self) -> list[Step]:
        return [s for s in self.steps if s.upward]

    @property
    def narrow(self) -> list[Stop]:
        return [s for s in self.stops if s.narrow]

    def summary(self) -> str:
        return (f"stops {len(self.stops)}, files {len(self.files)}, climbs back {len(self.climbs)}, "
                f"upward passes {len(self.upward)}, narrow stops {len(self.narrow)}")


class Index:
    """Every module, function, class and import of a package, parsed."""

    def __init__(self, root: Path):
        self.root = root
        self.package = root.name
        self.paths: dict[str, Path] = {}
        self.imports: dict[str, dict[str, str]] = {}
        self.funcs: dict[str, Func] = {}
        self.classes: dict[str, Class] = {}
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            self.paths[".".join(parts)] = path
        for module, path in self.paths.items():
            tree = ast.parse(path.read_text(), str(path))
            self.imports[module] = self._imports(tree)
            self._collect(module, path, tree.body, prefix=module, cls=None, outer=None)

    @staticmethod
    def _imports(tree: ast.Module) -> dict[str, str]:
        """Local name -> dotted target of the module's absolute imports (the package has no relative ones; a call
        through one would be listed as not followed)."""
        out: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                out.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        return out

    def _collect(self, module: str, path: Path, body: list[ast.stmt], prefix: str, cls: str | None,
                 outer: Func | None) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                f = Func(f"{prefix}.{node.name}", module, path, node, cls, outer)
                self.funcs[f.qualname] = f
                if cls is not None:
                    self.classes[cls].methods[node.name] = f
                self._collect(module, path, node.body, f.qualname, None, f)
            elif isinstance(node, ast.ClassDef):
                c = Class(f"{prefix}.{node.name}", module, node)
                self.classes[c.qualname] = c
                self._collect(module, path, node.body, c.qualname, c.qualname, outer)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):  # definitions under `if TYPE_CHECKING:` etc.
                inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
                self._collect(module, path, inner, prefix, cls, outer)

    # -- names ------------------------------------------------------------------------------------------------

    def resolve(self, dotted: str, seen: frozenset = frozenset()) -> str | None:
        """The package definition (function, class or module) a dotted name means, through re-exports."""
        if dotted in self.funcs or dotted in self.classes or dotted in self.paths:
            return dotted
        if dotted in seen or not dotted.startswith(self.package):
            return None
        head, _, name = dotted.rpartition(".")
        if head in self.paths and name in self.imports[head]:
            return self.resolve(self.imports[head][name], seen | {dotted})
        if head and (owner := self.resolve(head, seen | {dotted})) and owner != head:
            return self.resolve(f"{owner}.{name}", seen | {dotted})
        return None

    def lookup(self, name: str, func: Func) -> str | None:
        """What a bare name means inside `func`: a nested function, a definition of the module, an import."""
        scope: Func | None = func
        while scope is not None:
            if f"{scope.qualname}.{name}" in self.funcs:
                return f"{scope.qualname}.{name}"
            scope = scope.outer
        if f"{func.module}.{name}" in self.funcs or f"{func.module}.{name}" in self.classes:
            return f"{func.module}.{name}"
        target = self.imports[func.module].get(name)
        return self.resolve(target) if target else None

    def method(self, cls: str, name: str, seen: frozenset = frozenset()) -> Func | None:
        """`cls`'s method `name`, or its nearest package base's."""
        c = self.classes.get(cls)
        if c is None or cls in seen:
            return None
        if name in c.methods:
            return c.methods[name]
        for base in c.node.bases:
            owner = self.expr_target(base, self.funcs_of_module(c.module))
            if owner in self.classes and (m := self.method(owner, name, seen | {cls})):
                return m
        return None

    def funcs_of_module(self, module: str) -> Func:
        """A stand-in function for resolving names at a module's top level."""
        return Func(f"{module}.<module>", module, self.paths[module], ast.FunctionDef(name="<module>", args=None))

    def expr_target(self, expr: ast.expr, func: Func, types: dict[str, str] | None = None) -> str | None:
        """The package definition an expression names (``f``, ``mod.f``, ``Class.method``, ``obj.method``)."""
        if isinstance(expr, ast.Name):
            if types and expr.id in types:
                return types[expr.id]
            return self.lookup(expr.id, func)
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
                owner = _method_class(func)
                m = self.method(owner, expr.attr) if owner else None
                return m.qualname if m else None
            owner = self.expr_target(expr.value, func, types)
            if owner in self.classes:
                m = self.method(owner, expr.attr)
                return m.qualname if m else None
            if owner in self.paths:
                return self.resolve(f"{owner}.{expr.attr}")
        return None


def _method_class(func: Func) -> str | None:
    scope: Func | None = func
    while scope is not None:
        if scope.cls:
            return scope.cls
        scope = scope.outer
    return None


def _annotation_classes(index: Index, node: ast.expr | None, func: Func) -> list[str]:
    if node is None:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return []
    if isinstance(node, ast.BinOp):
        return _annotation_classes(index, node.left, func) + _annotation_classes(index, node.right, func)
    if isinstance(node, ast.Subscript):
        return _annotation_classes(index, node.slice, func)
    if isinstance(node, ast.Tuple):
        return [c for e in node.elts for c in _annotation_classes(index, e, func)]
    target = index.expr_target(node, func)
    return [target] if target in index.classes else []


def _body_nodes(func: Func) -> list[ast.AST]:
    """Every node of the function's body, nested functions included, in source order."""
    nodes = [n for stmt in func.node.body for n in ast.walk(stmt)]
    return sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


class Analysis:
    def __init__(self, index: Index, layers: list[tuple[str, tuple[str, ...]]], fields: bool = False):
        self.index = index
        self.fields = fields
        self.rank = {pkg: i for i, (_, pkgs) in enumerate(layers) for pkg in pkgs}
        self.stops: list[Stop] = []
        self.steps: list[Step] = []
        self.walked: set[tuple] = set()

    def rel(self, path: Path) -> str:
        return path.relative_to(self.index.root.parent).as_posix()

    def layer(self, module: str) -> int | None:
        parts = module.split(".")
        return self.rank.get(parts[1] if len(parts) > 1 else "")

    def types(self, func: Func) -> dict[str, str]:
        """Local name -> package class, from annotations and constructor assignments."""
        out: dict[str, str] = {}
        a = func.node.args
        for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            found = _annotation_classes(self.index, p.annotation, func)
            if found:
                out[p.arg] = found[0]
        for node in _body_nodes(func):
            if isinstance(node, ast.Assign):
                pairs = [(t, node.value) for t in node.targets]
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                pairs = [(node.target, node.value)]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                pairs = [(node.optional_vars, node.context_expr)]
            else:
                continue
            for target, value in pairs:
                values = value.values if isinstance(value, ast.BoolOp) else [value]
                for v in values:
                    if isinstance(target, ast.Name) and isinstance(v, ast.Call):
                        cls = self.index.expr_target(v.func, func)
                        if cls in self.index.classes:
                            out[target.id] = cls
        return out

    def followed(self, func: Func, params: set[str], taken_params: set[str]) -> tuple[set[str], set[str]]:
        """(names holding the whole config, names holding a value taken from it: with `fields` only)."""
        names, taken = set(params), set(taken_params)
        changed = True
        while changed:
            changed = False
            for node in _body_nodes(func):
                if isinstance(node, ast.Assign):
                    targets, value = node.targets, node.value
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                    targets, value = [node.target], node.value
                elif isinstance(node, ast.For):
                    targets, value = [node.target], node.iter
                else:
                    continue
                bound = {n for t in targets for n in _names(t)}
                if self.is_config(value, names):  # a rebound followed name stays followed
                    new, into = bound - names, names
                elif self.fields and self.is_taken(value, names, taken, func):
                    new, into = bound - names - taken, taken
                else:
                    continue
                if new:
                    into |= new
                    changed = True
        return names, taken

    @staticmethod
    def is_config(expr: ast.expr, names: set[str]) -> bool:
        """The whole config: a followed name, or ``replace(<the config>, ...)``."""
        if isinstance(expr, ast.Name):
            return expr.id in names
        if isinstance(expr, ast.Call) and ast.unparse(expr.func) in REPLACE and expr.args:
            return Analysis.is_config(expr.args[0], names)
        return False

    def is_taken(self, expr: ast.expr, names: set[str], taken: set[str], func: Func) -> bool:
        """A value taken from the config (`fields` mode): ``config.X``, ``config.X.get(...)``, ``config.X[...]``,
        a name holding one, ``Path(<one>)`` (a call outside the package), either branch of ``a if c else b``."""
        if self.is_config(expr, names) or (isinstance(expr, ast.Name) and expr.id in taken):
            return True
        if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
            return self.is_taken(expr.value, names, taken, func)
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Attribute) and self.is_taken(expr.func.value, names, taken, func):
                return True
            outside = isinstance(expr.func, ast.Name) and self.index.expr_target(expr.func, func) is None
            return outside and bool(expr.args) and self.is_taken(expr.args[0], names, taken, func)
        if isinstance(expr, ast.IfExp):
            return any(self.is_taken(e, names, taken, func) for e in (expr.body, expr.orelse))
        if isinstance(expr, ast.BoolOp):
            return any(self.is_taken(e, names, taken, func) for e in expr.values)
        return False

    def visit(self, func: Func, params: set[str], taken_params: set[str], depth: int) -> None:
        """One stop: `params` receive the whole config, `taken_params` values taken from it (`fields` mode)."""
        stop = Stop(func.qualname, self.rel(func.path), ", ".join(sorted(params | taken_params)), depth,
                    whole=bool(params))
        self.stops.append(stop)
        names, taken = self.followed(func, params, taken_params)
        for node in _body_nodes(func):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and self.is_config(node.value, names):
                stop.reads.append(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and len(node.args) >= 2 and self.is_config(node.args[0], names)
                  and isinstance(node.args[1], ast.Constant)):
                stop.reads.append(str(node.args[1].value))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                    and self.is_config(node.value, names):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                stop.not_followed += [f"stored in {ast.unparse(t)}" for t in targets if isinstance(t, ast.Attribute)]
        stop.reads = sorted(set(stop.reads))
        key = (func.qualname, frozenset(params), frozenset(taken_params))
        if key in self.walked:
            stop.repeated = True
            return
        self.walked.add(key)
        types = self.types(func)
        for node in _body_nodes(func):
            if not isinstance(node, ast.Call) or ast.unparse(node.func) in REPLACE | {"getattr"}:
                continue
            args = [(i, None, a) for i, a in enumerate(node.args)] + [(None, k.arg, k.value) for k in node.keywords]
            passed = [(i, k, self.is_config(a, names)) for i, k, a in args
                      if self.is_config(a, names) or (self.fields and self.is_taken(a, names, taken, func))]
            if not passed:
                continue
            target = self.index.expr_target(node.func, func, types)
            callee = self.index.funcs.get(target) if target else None
            if target in self.index.classes:
                callee = self.index.method(target, "__init__")
            if callee is None:
                if any(w for _, _, w in passed) or target:
                    stop.not_followed.append(f"{ast.unparse(node.func)}(...) line {node.lineno}")
                continue
            whole_in, taken_in = set(), set()
            for i, k, is_whole in passed:
                cparam = callee.param_for(i, k)
                if cparam is None:
                    stop.not_followed.append(f"{ast.unparse(node.func)}(...) line {node.lineno}: no parameter")
                else:
                    (whole_in if is_whole else taken_in).add(cparam)
            if not whole_in and not taken_in:
                continue
            seen = {s.path for s in self.stops}
            caller_path, callee_path = self.rel(func.path), self.rel(callee.path)
            a, b = self.layer(func.module), self.layer(callee.module)
            self.steps.append(Step(func.qualname, callee.qualname, node.lineno, caller_path, callee_path,
                                   climb=callee_path != caller_path and callee_path in seen,
                                   upward=a is not None and b is not None and b > a))
            stop.passes += 1
            self.visit(callee, whole_in, taken_in - whole_in, depth + 1)


def walk(root: Path = PACKAGE, start: str = START, layers: list[tuple[str, tuple[str, ...]]] | None = None,
         fields: bool = False) -> Walk:
    """Follow the parameter named by `start` (``module:function:parameter``, a method as ``Class.method``) through
    the package at `root`; `layers` defaults to the import-graph test's ``LAYERS``. With `fields`, values taken
    from the config (``config.X`` and what is made of it) are followed too."""
    module, function, param = start.split(":")
    index = Index(Path(root))
    func = index.funcs.get(f"{module}.{function}")
    if func is None:
        raise SystemExit(f"{module}.{function}: no such function under {root}")
    analysis = Analysis(index, read_layers() if layers is None else layers, fields)
    analysis.visit(func, {param}, set(), 0)
    return Walk(start, analysis.stops, analysis.steps)


def render(result: Walk) -> str:
    """The walk as text: one line per stop (indented by depth), then the climbs, upward passes and totals."""
    lines = [f"config path from {result.start}"]
    for n, s in enumerate(result.stops, 1):
        short = s.qualname.split(".", 1)[1] if "." in s.qualname else s.qualname
        reads = ", ".join(s.reads) or "-"
        extra = ("" if s.whole else " ~") + (" (again)" if s.repeated else "")
        lines.append(f"{n:3} {'  ' * s.depth}{short}({s.param}){extra}  [{s.path}]  reads: {reads}")
        lines += [f"    {'  ' * s.depth}  not followed: {x}" for x in s.not_followed]
    for title, steps in (("climb back", result.climbs), ("upward pass", result.upward)):
        for s in steps:
            lines.append(f"{title}: {s.caller} ({s.caller_path}:{s.line}) -> {s.callee} ({s.callee_path})")
    for s in result.narrow:
        lines.append(f"narrow: {s.qualname} takes the whole config for {', '.join(s.reads)}")
    lines.append(result.summary())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=PACKAGE, help="the package's folder (default: advisor/)")
    parser.add_argument("--start", default=START, help=f"MODULE:FUNCTION:PARAM (default {START})")
    parser.add_argument("--layers", type=Path, default=LAYERS_FILE, help="the file whose LAYERS table to use")
    parser.add_argument("--fields", action="store_true",
                        help="also follow values taken from the config (config.X passed on; marked ~)")
    parser.add_argument("--json", action="store_true", help="stops and steps as JSON")
    args = parser.parse_args(argv)
    result = walk(args.root, args.start, read_layers(args.layers), args.fields)
    if args.json:
        print(json.dumps({"stops": [vars(s) for s in result.stops], "steps": [vars(s) for s in result.steps],
                          "files": result.files, "climbs_back": len(result.climbs),
                          "upward": len(result.upward)}, indent=1))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
