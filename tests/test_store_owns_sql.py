"""One module owns the database: no SQL text, DuckDB import or store connection outside `advisor/store/`.

Scans every module of the package with `ast` (string constants and f-strings, imports, attribute access), so a
query that creeps back into the floor finder, the report, the router or the service fails here with its file
and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "advisor"
STORE = PACKAGE / "store"

_SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+\s+SET\b"
                  r"|\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|VIEW|INDEX)\b|\bALTER\s+TABLE\b")


def offences(source: str, label: str) -> list[str]:
    """Where `source` holds SQL text, imports duckdb or reaches a store's private connection."""
    tree = ast.parse(source, filename=label)
    fstring_parts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in fstring_parts:
            text = node.value
        else:
            text = None
        if text is not None and _SQL.search(text):
            found.append(f"{label}:{node.lineno}: SQL text {text.strip()[:60]!r}")
        if isinstance(node, ast.Attribute) and node.attr == "_con":
            found.append(f"{label}:{node.lineno}: reaches a store's connection (_con)")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n.split(".")[0] == "duckdb" for n in names):
                found.append(f"{label}:{node.lineno}: imports duckdb")
    return sorted(set(found))


def test_sql_lives_only_under_advisor_store():
    found = [o for path in sorted(PACKAGE.rglob("*.py")) if STORE not in path.parents
             for o in offences(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))]
    assert found == [], "SQL or DuckDB outside advisor/store/ (add a Store method instead):\n" + "\n".join(found)


def test_the_scan_finds_each_kind_of_offence():
    code = ('import duckdb\n'
            'Q = "SELECT rung FROM runs WHERE x = ?"\n'
            'def f(store, table):\n'
            '    return store._con.execute(f"DELETE FROM {table} WHERE 1")\n'
            'HELP = "select a rung from the ladder"\n')
    found = offences(code, "sample.py")
    assert [o.split(": ", 1)[1].split(" ")[0] for o in found] == ["imports", "SQL", "SQL", "reaches"], found
    assert any(":4: SQL" in o for o in found) and any(":2: SQL" in o for o in found)


def test_store_mixins_define_each_method_once():
    """The Store's query mixins are one class in Python's eyes: a method defined in two would shadow silently."""
    from advisor.store import Store

    seen: dict[str, str] = {}
    clashes = []
    for base in Store.__mro__[1:]:
        for name, value in vars(base).items():
            if callable(value) and not name.startswith("__"):
                if name in seen:
                    clashes.append(f"{name}: {seen[name]} and {base.__name__}")
                seen.setdefault(name, base.__name__)
    assert clashes == []
