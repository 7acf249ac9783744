"""What the sandbox copies back to the host workspace (issue 38, cases 3, 4 and 14): regular files, folders and
links only, never a setuid/setgid bit, within workspace_mb counted by apparent size (sparse files included),
at any folder depth. Every test runs real code in the real bubblewrap sandbox (as root: the tmpfs copy)."""

from __future__ import annotations

import asyncio
import os
import stat

from advisor.tools.environment import Environment
from advisor.tools.sandbox import SandboxLimits
from advisor.tools.tree import remove_tree, walk_entries
from test_sandbox_limits import needs_root_bwrap, run, ws  # noqa: F401 - ws is a fixture

DEPTH = 1500


@needs_root_bwrap
def test_no_setuid_or_setgid_bit_and_no_special_file_comes_back(ws):
    """A copy of python made mode 04755, a setgid folder, a FIFO: the host gets the file 0755, the folder
    without setgid, no FIFO."""
    code = """
import os, shutil
shutil.copy('/usr/bin/python3', 's')
os.chmod('s', 0o4755)
os.mkdir('shared')
os.chmod('shared', 0o2775)
open('shared/g', 'w').write('g')
os.chmod('shared/g', 0o2755)
os.mkfifo('pipe')
print('done')
"""
    result = run(ws, code, SandboxLimits())
    assert result.returncode == 0 and result.problem is None, result.stderr
    mode = os.lstat(ws / "s").st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o755, oct(mode)
    assert not os.lstat(ws / "shared").st_mode & (stat.S_ISUID | stat.S_ISGID)
    assert stat.S_IMODE(os.lstat(ws / "shared" / "g").st_mode) == 0o755
    assert not (ws / "pipe").exists()


@needs_root_bwrap
def test_sparse_files_count_at_their_apparent_size(ws):
    """40 sparse files of 1 MiB take no tmpfs space; copied back they would be 40 MiB on the host. With
    workspace_mb 16 at most 16 MiB come back, and the call says why, naming the limit and a file left out."""
    code = """
for i in range(40):
    with open(f'sparse-{i:02d}.bin', 'wb') as f:
        f.truncate(2**20)
print('truncated')
"""
    result = run(ws, code, SandboxLimits(workspace_mb=16))
    assert "truncated" in result.stdout
    assert result.problem and result.problem.startswith("workspace limit exceeded"), (result.problem, result.stderr)
    assert "apparent size" in result.problem and "16 MiB limit (workspace_mb)" in result.problem
    assert "not copied back: sparse-16.bin" in result.problem
    files = [(p, info) for p, info in walk_entries(ws) if stat.S_ISREG(info.st_mode)]
    assert len(files) == 16 and sum(info.st_size for _, info in files) <= 16 * 2**20
    assert sum(info.st_blocks * 512 for _, info in files) <= 16 * 2**20


@needs_root_bwrap
def test_sparse_breach_is_a_clear_run_python_error(tmp_path):
    """The model sees an ok=False observation naming the limit, not a time limit."""
    from test_tools import _task

    env = Environment.create(_task(tools=["run_python"]), tmp_path, limits=SandboxLimits(workspace_mb=4))
    try:
        call = asyncio.run(env.call("run_python", {"code": "for i in range(8):\n"
                                                           "    open(f'h{i}', 'wb').truncate(2**20)\n"}))
    finally:
        env.close()
    assert not call.ok and call.observation.startswith("error: workspace limit exceeded"), call.observation


@needs_root_bwrap
def test_a_1500_deep_folder_tree_round_trips_and_is_removed(ws):
    """The copy back, the next call's copy in, list_files and the removal of the tree all work at depth 1500
    (each recursed once per level before and stopped with RecursionError past ~1,000)."""
    try:
        made = run(ws, f"import os\nfor _ in range({DEPTH}):\n    os.mkdir('d')\n    os.chdir('d')\n"
                       "open('leaf.txt', 'w').write('deep')\nprint('made')\n", SandboxLimits(timeout_s=30))
        assert made.returncode == 0 and made.problem is None, (made.problem, made.stderr[-500:])
        leaf = ws.joinpath(*["d"] * DEPTH, "leaf.txt")
        assert leaf.read_text() == "deep"
        again = run(ws, "import os\nos.rename('d', 'e')\nprint('renamed')\n", SandboxLimits(timeout_s=30))
        assert again.returncode == 0 and again.problem is None and "renamed" in again.stdout, again.stderr[-500:]
        assert not (ws / "d").exists()
        assert ws.joinpath(*["e"] + ["d"] * (DEPTH - 1), "leaf.txt").read_text() == "deep"

        from advisor.tools.files import workspace_files

        assert [rel for rel, _ in workspace_files(ws)] == ["/".join(["e"] + ["d"] * (DEPTH - 1) + ["leaf.txt"])]
        remove_tree(ws / "e")
        assert not (ws / "e").exists()
    finally:  # never leave a 1,500-deep tree to pytest's own (recursive) clean-up of old tmp_path folders
        remove_tree(ws)
