"""The store's roles declare what their callers use, with the DuckDB store's signatures, and the stores play them.

Every public method of `advisor.store.Store` is declared by a role protocol (`RunStore`, `LiveRecords`,
`RouterRegistry`) or listed in `STORE_INTERNAL`; a method that code outside `advisor.store` calls (``x.name(...)``,
or by name through ``Reconnecting.call``/``getattr``) is never store-internal. The PostgreSQL store has every method
of the roles it plays (`LiveRecords`, `RouterRegistry`), with the same signatures (checked on the class here; on a
real PostgreSQL in `tests/test_store_postgres.py`). `is_database_url` asks the registered `StoreKind`, so a
shared store added by one registration is a database URL without editing it.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from advisor.store import STORES, LiveOverlay, LiveRecords, RouterRegistry, RunStore, Store, StoreKind
from advisor.store.postgres import PostgresStore
from advisor.store.protocols import ROLES, STORE_INTERNAL, _Handle, is_database_url, role_methods

ADVISOR = Path(__file__).resolve().parent.parent / "advisor"
#: `Path.open`, `open(...)` of files: the same word as `Store.open`, which callers reach through `open_store`
HOMONYMS = {"open"}


def _public(cls) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def _declared() -> set[str]:
    return set().union(*(role_methods(role) for role in ROLES))


def _names_used_outside_the_store() -> dict[str, list[str]]:
    """Method names code outside advisor/store calls on some object: ``x.name(...)``, and the name given as a
    string to ``.call``/``._call``/``getattr``; with the files that call each."""
    used: dict[str, list[str]] = {}
    for path in sorted(ADVISOR.rglob("*.py")):
        rel = path.relative_to(ADVISOR.parent)
        if rel.parts[:2] == ("advisor", "store"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func, names = node.func, []
            if isinstance(func, ast.Attribute):
                names.append(func.attr)
            if node.args:
                by_name = (isinstance(func, ast.Attribute) and func.attr in ("call", "_call")) or \
                          (isinstance(func, ast.Name) and func.id == "getattr")
                arg = node.args[1] if isinstance(func, ast.Name) and len(node.args) > 1 else node.args[0]
                if by_name and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names.append(arg.value)
            for name in names:
                used.setdefault(name, []).append(str(rel))
    return used


def _shape(fn) -> tuple:
    """A signature as comparable data: parameters (name, kind, default, annotation) and the return annotation."""
    sig = inspect.signature(fn)
    return ([(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values()], sig.return_annotation)


def test_every_public_store_method_is_on_a_role_or_store_internal():
    public, declared = _public(Store), _declared()
    assert declared <= public, f"roles declare what Store lacks: {sorted(declared - public)}"
    assert public - declared == set(STORE_INTERNAL), (
        f"declared by no role and not in STORE_INTERNAL: {sorted(public - declared - set(STORE_INTERNAL))}; "
        f"in STORE_INTERNAL but not a bare public Store method: {sorted(set(STORE_INTERNAL) - (public - declared))}")


def test_a_store_method_used_outside_the_store_is_declared_by_a_role():
    used = _names_used_outside_the_store()
    undeclared = {n: used[n] for n in (_public(Store) & set(used)) - _declared() - HOMONYMS}
    assert not undeclared, ("Store methods used outside advisor/store that no role declares (put each on the "
                            f"role its caller uses, in advisor/store/protocols.py): {undeclared}")
    # and the scan sees what it should: calls by attribute and by name through Reconnecting
    assert {"record_import", "live_counts", "set_pointer", "put_artifact"} <= set(used)


def test_the_roles_signatures_are_the_duckdb_stores():
    for role in ROLES:
        for name in role_methods(role):
            assert _shape(getattr(role, name)) == _shape(getattr(Store, name)), f"{role.__name__}.{name}"


def test_the_postgres_store_has_what_its_roles_declare():
    for role in (LiveRecords, RouterRegistry):
        for name in role_methods(role):
            assert hasattr(PostgresStore, name), f"PostgresStore lacks {role.__name__}.{name}"
            assert _shape(getattr(role, name)) == _shape(getattr(PostgresStore, name)), f"{role.__name__}.{name}"
    # it keeps no runs: asked for a RunStore, open_store refuses it
    assert role_methods(RunStore) - _public(PostgresStore)


def test_the_duckdb_store_plays_every_role_and_the_overlay_routes_by_role(tmp_path):
    with Store.open(tmp_path / "s.duckdb") as store:
        assert all(isinstance(store, role) for role in ROLES)
    assert LiveOverlay._LIVE == (role_methods(LiveRecords) | role_methods(RouterRegistry)) - role_methods(_Handle)
    assert not LiveOverlay._LIVE & role_methods(RunStore)
    live = Store.open(tmp_path / "live.duckdb")
    live.add_live([{"decision_id": "d1", "created_at": "2026-01-01 00:00:00", "request_hash": "h", "policy": "learned",
                    "mode": "escalate", "chosen_rung": "small", "explanation_json": "{}"}], [])
    with LiveOverlay(Store.open(tmp_path / "s.duckdb"), live) as both:
        assert all(isinstance(both, role) for role in ROLES)
        assert both.live_counts() == (1, 0)  # a live query: answered by the live store
        assert both.run_counts() == []  # a runs query: answered by the runs store


@pytest.fixture
def toy_shared_store(monkeypatch):
    monkeypatch.setattr(STORES, "_items", dict(STORES.items()))
    STORES.add("toydb", StoreKind(lambda location, read_only: None, "a toy database server", shared=True))
    STORES.add("toyfile", StoreKind(lambda location, read_only: None, "a toy local store"))


def test_is_database_url_asks_the_registered_store_kind(toy_shared_store, tmp_path):
    from advisor.router.feedback.pointers import DatabasePointer, FilePointer, pointer_for
    from advisor.service.launch import default_spool

    for url in ("postgresql://u@h/db", "postgres://u@h/db", "toydb://h/x"):
        assert is_database_url(url), url
    for location in ("toyfile://x", tmp_path / "s.duckdb", str(tmp_path / "s.duckdb"), "duckdb:///a/s.duckdb",
                     "nosuch://x", None):
        assert not is_database_url(location), location
    assert isinstance(pointer_for("toydb://h/x"), DatabasePointer)
    assert isinstance(pointer_for(tmp_path / "router.pointer.json"), FilePointer)
    assert default_spool("toydb://h/x") == Path("advisor-spool")
    assert default_spool(tmp_path / "s.duckdb") != Path("advisor-spool")
