"""The README's first command on a machine without bubblewrap: `make probe` installs it where it can (root with
apt-get) and otherwise probes the example suite without the tasks that run code, saying so in one line.

bwrap is installed on the machines that run these tests, so its absence is simulated: a PATH made of links to
every program on the real one except ``bwrap`` (and, for the Makefile, a recording ``apt-get``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def _path_without_bwrap(tmp: Path, extra: dict[str, str] | None = None) -> str:
    """A PATH of one folder holding links to every program on today's PATH but bwrap (plus `extra` scripts)."""
    folder = tmp / "bin"
    folder.mkdir()
    for d in reversed(os.environ["PATH"].split(os.pathsep)):
        if not os.path.isdir(d):
            continue
        for entry in os.scandir(d):
            if entry.name != "bwrap" and os.access(entry.path, os.X_OK):
                link = folder / entry.name
                link.unlink(missing_ok=True)
                link.symlink_to(entry.path)
    for name, text in (extra or {}).items():
        (folder / name).unlink(missing_ok=True)
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    assert shutil.which("bwrap", path=str(folder)) is None
    return str(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="the Makefile installs bubblewrap only as root")
@pytest.mark.parametrize("install", ["yes", "no"])
def test_make_sandbox_installs_bubblewrap_with_apt_get_when_it_is_missing(tmp_path, install):
    log = tmp_path / "apt.log"
    path = _path_without_bwrap(tmp_path, {"apt-get": f'#!/bin/sh\necho "$DEBIAN_FRONTEND $*" >> {log}\n'})
    done = subprocess.run(["make", "-s", "-C", str(REPO), "sandbox", f"INSTALL_BWRAP={install}"],
                          env={**os.environ, "PATH": path}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    if install == "yes":
        assert log.read_text().splitlines() == ["noninteractive install -y -qq bubblewrap"]
        assert done.stdout == "installing bubblewrap (apt-get) for the run_python sandbox\n"
    else:
        assert not log.exists() and done.stdout == ""


def test_make_sandbox_is_silent_when_bwrap_is_there(tmp_path):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed here")
    done = subprocess.run(["make", "-s", "-C", str(REPO), "sandbox"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


@pytest.mark.slow
@pytest.mark.triton
def test_probe_without_bubblewrap_runs_the_example_suite_without_its_code_tasks(tmp_path):
    """`advisor probe` with no arguments and no bwrap: exit 0, one line naming what was skipped and how to run it,
    the per-class answer, and no run of a task that runs code in the store."""
    from advisor.store import Store
    from advisor.suite import load_suite
    from advisor.tools.sandbox import runs_code

    env = {**os.environ, "PATH": os.pathsep.join([str(VENV_BIN), _path_without_bwrap(tmp_path)]),
           "COLUMNS": "160"}
    store = tmp_path / "first.duckdb"
    done = subprocess.run([str(VENV_BIN / "advisor"), "probe", "--store", str(store), "--no-report",
                           "--max-runs", "120"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    skipped = [ln for ln in done.stderr.splitlines() if ln.startswith("sandbox:")]
    assert len(skipped) == 1, done.stderr
    assert "bwrap" in skipped[0] and "code_change 9/9" in skipped[0] and "apt-get install bubblewrap" in skipped[0]
    assert "The answer, per class" in done.stdout
    code = {t.id for t in load_suite(REPO / "suites/example/suite.yaml").tasks if runs_code(t)}
    with Store.open(store, read_only=True) as s:
        ran = {r["task_id"] for r in s.query("SELECT DISTINCT task_id FROM runs")}
    assert ran and not ran & code


def test_an_explicit_suite_that_runs_code_is_still_refused_without_bubblewrap(tmp_path):
    env = {**os.environ, "PATH": os.pathsep.join([str(VENV_BIN), _path_without_bwrap(tmp_path)])}
    done = subprocess.run([str(VENV_BIN / "advisor"), "probe", "--store", str(tmp_path / "x.duckdb"), "--suite",
                           str(REPO / "suites/example/suite.yaml")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "run_python refused" in done.stderr and "Traceback" not in done.stderr
