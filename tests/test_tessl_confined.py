"""A Tessl import reads only inside the tree it was given: symlinks out, absolute and '..' skill paths, FIFOs and
non-UTF-8 text are each one line naming the file and the rule (exit 2 from the CLI), and no host file reaches the
suite. Real trees on disk with real symlinks and a real FIFO."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import DataError
from advisor.importers.tessl import import_tessl

CHECKLIST = [{"name": "Writes the file", "description": "Writes out.txt", "max_score": 10}]
SECRET = "host-secret-7f3a"


def _scenario(root: Path, task: str = "Write out.txt with the word done.") -> Path:
    d = root / "evals" / "s1"
    d.mkdir(parents=True)
    (d / "task.md").write_text(task)
    (d / "criteria.json").write_text(json.dumps({"type": "weighted_checklist", "checklist": CHECKLIST}))
    return d


@pytest.fixture
def host(tmp_path) -> Path:
    """A folder outside every imported tree, holding what must never be read."""
    outside = tmp_path / "host"
    (outside / "skill").mkdir(parents=True)
    (outside / "secret.txt").write_text(SECRET)
    (outside / "skill" / "SKILL.md").write_text(f"# skill\n{SECRET}\n")
    (outside / "skill" / "notes.md").write_text(SECRET)
    return outside


def _refused(tmp_path: Path, src: Path, capsys, *words: str) -> str:
    out = tmp_path / "suite" / "suite.yaml"
    with pytest.raises(DataError) as err:
        import_tessl(src, out)
    message = str(err.value)
    assert all(w in message for w in words), message
    assert main(["suite", "import", "tessl", str(src), "--out", str(out)]) == 2
    printed = capsys.readouterr().err
    assert "Traceback" not in printed and len(printed.strip().splitlines()) == 1, printed
    assert not out.exists() or SECRET not in out.read_text()
    return message


def test_a_symlinked_task_md_is_refused(tmp_path, host, capsys):
    src = tmp_path / "tree"
    d = _scenario(src)
    (d / "task.md").unlink()
    (d / "task.md").symlink_to(host / "secret.txt")
    _refused(tmp_path, src, capsys, "task.md", "outside the folder being imported")


def test_a_symlinked_scenario_file_never_becomes_a_fixture(tmp_path, host):
    src = tmp_path / "tree"
    d = _scenario(src)
    (d / "data.txt").symlink_to(host / "secret.txt")
    (d / "ok.txt").write_text("inside")
    out = tmp_path / "suite" / "suite.yaml"
    import_tessl(src, out)
    text = out.read_text()
    assert SECRET not in text and "inside" in text


@pytest.mark.parametrize("path", ["ABSOLUTE", "../host/skill/SKILL.md", "../host/skill"])
def test_a_skill_path_out_of_the_tile_is_refused(tmp_path, host, capsys, path):
    src = tmp_path / "tree"
    _scenario(src)
    rel = str(host / "skill" / "SKILL.md") if path == "ABSOLUTE" else path
    (src / "tile.json").write_text(json.dumps({"name": "o/t", "skills": {"s": {"path": rel}}}))
    _refused(tmp_path, src, capsys, "tile.json", "refused")


def test_a_symlinked_skill_folder_out_of_the_tile_is_refused(tmp_path, host, capsys):
    src = tmp_path / "tree"
    _scenario(src)
    (src / "skills").mkdir()
    (src / "skills" / "s").symlink_to(host / "skill")
    (src / "tile.json").write_text(json.dumps({"name": "o/t", "skills": {"s": {"path": "skills/s/SKILL.md"}}}))
    _refused(tmp_path, src, capsys, "outside the folder being imported")


def test_a_latin1_task_md_is_one_line(tmp_path, capsys):
    src = tmp_path / "tree"
    d = _scenario(src)
    (d / "task.md").write_bytes("Écrire le fichier out.txt".encode("latin-1"))
    _refused(tmp_path, src, capsys, "task.md", "not UTF-8")


def test_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    src = tmp_path / "tree"
    d = _scenario(src)
    (d / "capability.txt").unlink(missing_ok=True)
    os.mkfifo(d / "capability.txt")
    _refused(tmp_path, src, capsys, "capability.txt", "not a regular file")


def test_a_device_or_fifo_given_as_a_ladder_is_one_line(tmp_path, capsys):
    fifo = tmp_path / "ladder.yaml"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        assert main(["ladder", "validate", path]) == 2
        err = capsys.readouterr().err
        assert "not a regular file" in err and "Traceback" not in err, err
