"""Where the benchmarks find the shared data: $ADVISOR_SHARED, else ``../shared`` beside the repository root
(for a git worktree, also beside the main checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The shared folder (may not exist; `require` says so)."""
    if os.environ.get("ADVISOR_SHARED"):
        return Path(os.environ["ADVISOR_SHARED"])
    here = ROOT / ".." / "shared"
    if here.exists():
        return here.resolve()
    try:  # a worktree: ../shared beside the main checkout
        common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"], capture_output=True,
                                text=True, timeout=5).stdout.strip()
        if common:
            main = (ROOT / common).resolve().parent / ".." / "shared"
            if main.exists():
                return main.resolve()
    except (OSError, subprocess.SubprocessError):
        pass
    return here


def require(path: Path) -> Path:
    """`path`, or exit with one line saying where the data was looked for and how to point at it."""
    if not Path(path).exists():
        sys.exit(f"data not found: {path} (expected ../shared beside the repository root; set ADVISOR_SHARED=DIR "
                 "or pass the file as the first argument)")
    return Path(path)
