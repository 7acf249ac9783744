"""The generic name registry: register, lookup, did-you-mean, duplicates, lazy builtins."""

import sys
import types

import pytest

from advisor.registry import DuplicateNameError, Registry, UnknownNameError


def test_register_and_lookup():
    reg = Registry("widget")

    @reg.register("alpha")
    def alpha():
        return 1

    assert reg.get("alpha") is alpha
    assert "alpha" in reg and reg.names() == ["alpha"] and len(reg) == 1


def test_unknown_name_says_did_you_mean_and_available():
    reg = Registry("routing policy")
    reg.add("cascade", object())
    reg.add("floor", object())
    with pytest.raises(UnknownNameError) as info:
        reg.get("cascde")
    message = str(info.value)
    assert "unknown routing policy 'cascde'" in message
    assert "Did you mean 'cascade'?" in message
    assert "Available: cascade, floor." in message


def test_duplicate_name_is_an_error_unless_replaced():
    reg = Registry("check type")
    reg.add("regex", 1)
    with pytest.raises(DuplicateNameError):
        reg.add("regex", 2)
    reg.add("regex", 3, replace=True)
    assert reg.get("regex") == 3


def test_builtins_are_imported_lazily_on_first_lookup():
    name = "advisor_test_registry_builtin_module"
    reg = Registry("thing", builtins=(name,))
    module = types.ModuleType(name)
    imported = []

    def register_on_import():
        imported.append(True)
        reg.add("late", "value")

    sys.modules.pop(name, None)

    class Loader:
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            if fullname != name:
                return None
            import importlib.util
            return importlib.util.spec_from_loader(fullname, Loader)

        @staticmethod
        def create_module(spec):
            return module

        @staticmethod
        def exec_module(mod):
            register_on_import()

    sys.meta_path.insert(0, Loader)
    try:
        assert not imported  # creating the registry imported nothing
        assert reg.get("late") == "value"
        assert imported == [True]
        reg.names()
        assert imported == [True]  # once only
    finally:
        sys.meta_path.remove(Loader)
        sys.modules.pop(name, None)


def test_entry_points_of_installed_packages_are_imported_on_first_lookup(monkeypatch, tmp_path):
    import importlib.metadata

    (tmp_path / "advisor_test_plugin_mod.py").write_text(
        "from tests_registry_target import REG\nREG.add('from_plugin', 42)\n")
    target = types.ModuleType("tests_registry_target")
    reg = Registry("thing", entry_points="advisor.test_things")
    target.REG = reg
    monkeypatch.setitem(sys.modules, "tests_registry_target", target)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [importlib.metadata.EntryPoint("toy", "advisor_test_plugin_mod", "advisor.test_things")]
    asked = []

    def entry_points(group=None):
        asked.append(group)
        return found if group == "advisor.test_things" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert asked == []  # nothing at creation
    assert reg.get("from_plugin") == 42 and asked == ["advisor.test_things"]
    sys.modules.pop("advisor_test_plugin_mod", None)


def test_a_broken_plugin_is_one_clear_error(monkeypatch):
    import importlib.metadata

    from advisor.registry import PluginError

    reg = Registry("check type", entry_points="advisor.test_broken")
    broken = [importlib.metadata.EntryPoint("bad", "advisor_no_such_plugin_module", "advisor.test_broken")]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: broken)
    with pytest.raises(PluginError) as info:
        reg.names()
    msg = str(info.value)
    assert "check type plugin 'bad' (advisor_no_such_plugin_module" in msg and "ModuleNotFoundError" in msg
    assert "\n" not in msg
