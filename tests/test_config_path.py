"""The probe's ``config`` passes through each file it needs once, without climbing back and without running up a
layer (`benchmarks/config_path.py`, a static walk from `advisor.probe.session.run_probe`)."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Stops that take the whole config for one or two fields, and why they still do.
KNOWN_NARROW: dict[str, str] = {}


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("config_path", ROOT / "benchmarks" / "config_path.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_the_probe_config_visits_each_file_once(bench):
    walk = bench.walk()
    names = [s.qualname for s in walk.stops]
    assert names[0] == "advisor.probe.session.run_probe"
    assert "advisor.probe.planners.FullGridPlanner.start" in names  # the walk resolves methods: it is not empty
    assert not walk.climbs, bench.render(walk)
    assert not walk.upward, bench.render(walk)
    narrow = {s.qualname for s in walk.narrow} - set(KNOWN_NARROW)
    assert not narrow, f"pass these functions the fields they read instead of the whole config: {sorted(narrow)}"


SYNTHETIC = {
    "__init__.py": "",
    "low/__init__.py": "",
    "high/__init__.py": "",
    "low/a.py": """\
from dataclasses import replace
from pkg.high import b


class Runner:
    def run(self, conf):
        return self.inner(conf), conf.z

    def inner(self, conf):
        return conf.z


def start(config):
    runner = Runner()
    runner.run(config)
    other = replace(config, x=1)
    return b.g(other, config.y)


def back(*, options):
    return options.x, options.y
""",
    "high/b.py": """\
from pkg.low.a import back


def g(cfg, y):
    return back(options=cfg), y
""",
}


def test_the_walk_counts_a_climb_back_an_upward_pass_and_a_narrow_stop(bench, tmp_path):
    root = tmp_path / "pkg"
    for name, text in SYNTHETIC.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    walk = bench.walk(root, "pkg.low.a:start:config", [("low", ("low",)), ("high", ("high", ""))])
    assert [(s.qualname, s.param) for s in walk.stops] == [
        ("pkg.low.a.start", "config"), ("pkg.low.a.Runner.run", "conf"), ("pkg.low.a.Runner.inner", "conf"),
        ("pkg.high.b.g", "cfg"), ("pkg.low.a.back", "options")]
    assert walk.files == ["pkg/low/a.py", "pkg/high/b.py"]
    assert [(s.caller, s.callee) for s in walk.climbs] == [("pkg.high.b.g", "pkg.low.a.back")]
    assert [(s.caller, s.callee) for s in walk.upward] == [("pkg.low.a.start", "pkg.high.b.g")]
    assert [(s.qualname, s.reads) for s in walk.narrow] == [("pkg.low.a.Runner.inner", ["z"]),
                                                            ("pkg.low.a.back", ["x", "y"])]
    assert walk.stops[0].reads == ["y"]
    assert "climb back: pkg.high.b.g" in bench.render(walk)
    fields = bench.walk(root, "pkg.low.a:start:config", [("low", ("low",)), ("high", ("high", ""))], fields=True)
    assert [(s.qualname, s.param, s.whole) for s in fields.stops][3] == ("pkg.high.b.g", "cfg, y", True)
