"""`advisor store info|export` on a real DuckDB file."""

import json

from advisor.cli import main
from advisor.store import RunRecord, Store, make_run_key


def test_store_info_and_export(tmp_path, capsys):
    path = tmp_path / "s.duckdb"
    with Store.open(path) as store:
        store.add_run(RunRecord(run_key=make_run_key("x"), kind="probe", suite_name="example", suite_hash="h",
                                task_id="t", task_class="c", ladder_name="demo", ladder_hash="l", rung="nano-30b",
                                rung_position=1, simulated=True, unscored=True))
    assert main(["store", "info", "--store", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == [{"kind": "probe", "suite_name": "example", "rung": "nano-30b", "simulated": True,
                            "runs": 1, "unscored": 1}]
    assert main(["store", "info", "--store", str(path)]) == 0
    assert "[SIMULATED]" in capsys.readouterr().out
    assert main(["store", "export", str(tmp_path / "pq"), "--store", str(path)]) == 0
    assert (tmp_path / "pq" / "runs.parquet").exists()


def test_store_info_missing_file_is_one_line(tmp_path, capsys):
    assert main(["store", "info", "--store", str(tmp_path / "nope.duckdb")]) == 4
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
