"""Peak memory of `advisor import` per byte of the table it reads (the ratio behind ADVISOR_MAX_IMPORT_MB).

    .venv/bin/python benchmarks/import_memory.py [--mib 10]

Writes a CSV of three-model rows (``prompt_id,prompt,model,score``) of about `--mib` MiB to a temporary folder,
imports it into a fresh DuckDB store with the demo ladder as a child process, and prints the child's peak resident
memory (``ru_maxrss`` of the finished child), its ratio to the file's size and its memory per row.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_table(path: Path, mib: float) -> tuple[int, int]:
    """A three-model results table of about `mib` MiB; (its size in bytes, its rows)."""
    rng = random.Random(7)
    with path.open("w") as fh:
        fh.write("prompt_id,prompt,model,score\n")
        i = 0
        while fh.tell() < mib * 2**20:
            for model in ("nano-12b", "nano-30b", "super-120b"):
                fh.write(f'p{i},"What is the answer to question number {i} about the billing api?",{model},'
                         f"{rng.random():.3f}\n")
            i += 1
    return path.stat().st_size, 3 * i


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=10.0, help="size of the table to import")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "table.csv"
        size, rows = write_table(table, args.mib)
        advisor = str(Path(sys.executable).parent / "advisor")
        done = subprocess.run([advisor, "import", str(table), "--ladder", str(REPO / "ladders" / "demo.yaml"),
                               "--suite-name", "memory", "--store", str(Path(tmp) / "s.duckdb")],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    print(f"table {size / 2**20:.1f} MiB, {rows:,} rows; peak resident memory of the import {peak / 2**20:.0f} MiB; "
          f"{peak / size:.0f}x the table's size, {peak / rows / 1024:.1f} KiB a row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
