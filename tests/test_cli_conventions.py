"""Conventions every command follows, checked through the real CLI: flags, the version, the --suite option."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

from advisor.cli.reference import render_reference

ADVISOR = str(Path(sys.executable).parent / "advisor")


def test_version_prints_the_one_version():
    import advisor

    done = subprocess.run([ADVISOR, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"advisor {advisor.__version__}\n"
    assert importlib.metadata.version("advisor") == advisor.__version__  # pyproject.toml reads advisor.__version__


def test_flags_show_no_value_type_in_help():
    """An on-off flag takes no value: --help never shows it with a type such as <bool>."""
    text = render_reference()
    assert "<bool>" not in text
    assert "--json" in text and "--full-grid" in text and "--version" in text
