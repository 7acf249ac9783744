"""Reading recorded-result files (CSV, JSON lines, Parquet) through DuckDB: the store package's file reader.

DuckDB reads these files with SQL, and SQL lives in `advisor.store`; the importers call `read_table` and get
plain rows. Errors are one `DataError` line naming the file and the line or byte.
"""

from __future__ import annotations

import csv
import json
import re
import stat
from pathlib import Path
from typing import Any

from advisor.env_limits import count_limit, mib_limit
from advisor.errors import DataError
from advisor.nesting import json_depth, max_nesting, too_deep
from advisor.yamlio import check_utf8


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a CSV, JSONL or Parquet file as dicts, read by DuckDB (empty CSV cells become None).

    Text files must be UTF-8 (a byte-order mark, as Excel writes, is accepted); anything else is one
    `DataError` naming the file and the byte offset. CSV cells are read as text; JSONL and Parquet keep
    their types.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if path.is_dir():
        raise DataError(f"{path}: is a folder; name a .csv, .jsonl or .parquet file")
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"{path}: not a regular file (a FIFO, device or socket); give the table as a file")
    limit = max_import_bytes()
    if st.st_size > limit:
        raise DataError(f"{path}: {st.st_size / 2**20:.1f} MiB is over the {limit / 2**20:g} MiB limit on imported "
                        f"tables (reading takes about {MEMORY_RATIO}x a table's size in memory); split it, or set "
                        f"{MAX_IMPORT_ENV} to raise the limit")
    suffix = path.suffix.lower()
    readers = {".csv": _read_csv, ".jsonl": _read_jsonl, ".ndjson": _read_jsonl, ".parquet": _read_parquet,
               ".pq": _read_parquet}
    if suffix not in readers:
        raise DataError(f"{path}: unsupported file type {suffix!r}; use .csv, .jsonl or .parquet")
    if suffix in (".csv", ".jsonl", ".ndjson"):
        check_utf8(path, DataError)
        _no_nul(path)
    # heavy dependency, imported on use: duckdb
    import duckdb

    con = duckdb.connect()
    try:
        rows = readers[suffix](con, path)
    except duckdb.Error as exc:
        raise DataError(_duckdb_read_error(path, suffix, exc)) from None
    finally:
        con.close()
    return rows


MAX_IMPORT_ENV = "ADVISOR_MAX_IMPORT_MB"
DEFAULT_MAX_IMPORT_MB = 32  #: size limit of one imported table unless ADVISOR_MAX_IMPORT_MB is set
#: peak memory of `advisor import` per byte of a CSV table: 10 MiB of three-model rows peaked at 908 MiB, 91x
#: (`benchmarks/import_memory.py`, figures in docs/figures.md); the row limit below binds first on short rows
MEMORY_RATIO = 90


MAX_ROWS_ENV = "ADVISOR_MAX_IMPORT_ROWS"
DEFAULT_MAX_IMPORT_ROWS = 250_000  #: row limit of one imported table unless ADVISOR_MAX_IMPORT_ROWS is set (~2 GiB)
#: peak memory of `advisor import` per row, in KiB (`benchmarks/import_memory.py`, figures in docs/figures.md)
ROW_MEMORY_KIB = 8


def max_import_rows() -> int:
    """The row limit of one imported table (``ADVISOR_MAX_IMPORT_ROWS``, default 250,000)."""
    return count_limit(MAX_ROWS_ENV, DEFAULT_MAX_IMPORT_ROWS, "rows", DataError)


def max_import_bytes() -> int:
    """The size limit of one imported table in bytes (``ADVISOR_MAX_IMPORT_MB``, default 32 MiB)."""
    return mib_limit(MAX_IMPORT_ENV, DEFAULT_MAX_IMPORT_MB, DataError)


def _no_nul(path: Path) -> None:
    """A text table holds no NUL byte (a reader would stop at one and import what came before, silently)."""
    offset = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            at = chunk.find(b"\x00")
            if at >= 0:
                raise DataError(f"{path}: a NUL byte at byte {offset + at}: not a text table (a binary file, or a "
                                "file padded with zeros)")
            offset += len(chunk)


def _bounded(con, path: Path, source: str, params: list):
    """``SELECT * FROM source``, once DuckDB has counted its rows within the row limit (before any row becomes a
    Python object: an imported row costs kilobytes in memory, so a file of short rows under the size limit could
    still hold gigabytes' worth)."""
    (n,) = con.execute(f"SELECT count(*) FROM {source}", params).fetchone()
    limit = max_import_rows()
    if n > limit:
        raise DataError(f"{path}: {n:,} rows is over the {limit:,}-row limit on imported tables (an imported row "
                        f"takes about {ROW_MEMORY_KIB} KiB in memory); split it, or set {MAX_ROWS_ENV} to raise the "
                        "limit")
    return con.execute(f"SELECT * FROM {source}", params)


def _fetch_dicts(result, decode_json: bool = False) -> list[dict[str, Any]]:
    names = [d[0] for d in result.description]
    json_cols = {i for i, d in enumerate(result.description) if decode_json and str(d[1]) == "JSON"}
    rows = []
    for values in result.fetchall():
        if json_cols:
            values = [json.loads(v) if i in json_cols and v is not None else v for i, v in enumerate(values)]
        rows.append(dict(zip(names, values)))
    return rows


def _read_csv(con, path: Path) -> list[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        header = next(csv.reader(fh), None)
    if not header or not any(h.strip() for h in header):
        raise DataError(f"{path}: empty file (no header, no rows)")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise DataError(f"{path}: line 1: column(s) {', '.join(map(repr, dup))} appear twice in the header; "
                        "give every column its own name")
    columns = {h: "VARCHAR" for h in header}
    source = ("read_csv(?, header = true, auto_detect = false, columns = ?, delim = ',', quote = '\"', escape = '\"', "
              "strict_mode = true)")
    rows = _fetch_dicts(_bounded(con, path, source, [str(path), columns]))
    if not rows:
        raise DataError(f"{path}: no data rows (header only)")
    return [{k: (None if v == "" else v) for k, v in r.items()} for r in rows]


def _read_jsonl(con, path: Path) -> list[dict[str, Any]]:
    limit, empty = max_nesting(), True
    with path.open(encoding="utf-8-sig") as fh:
        for n, line in enumerate(fh, start=1):
            empty = empty and not line.strip()
            if json_depth(line) > limit:
                raise DataError(too_deep(f"{path}: line {n}", "JSON", limit))
    if empty:
        raise DataError(f"{path}: empty file (no JSON lines)")
    source = "read_json(?, format = 'newline_delimited', records = true, sample_size = -1)"
    return _fetch_dicts(_bounded(con, path, source, [str(path)]), decode_json=True)


def _read_parquet(con, path: Path) -> list[dict[str, Any]]:
    rows = _fetch_dicts(_bounded(con, path, "read_parquet(?)", [str(path)]))
    if not rows:
        raise DataError(f"{path}: empty file (no rows)")
    return rows


def _duckdb_read_error(path: Path, suffix: str, exc: Exception) -> str:
    """DuckDB's multi-line reader error as one line naming the file and the line or byte."""
    text = str(exc)
    if suffix == ".csv":
        line = re.search(r"CSV Error on Line: (\d+)", text)
        cols = re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", text)
        if line and cols:
            return (f"{path}: line {line.group(1)}: {cols.group(2)} fields where the header has {cols.group(1)}; "
                    "quote cells that contain commas")
        where = f": line {line.group(1)}" if line else ""
        return f"{path}{where}: not a readable CSV file ({_first_line(text)})"
    if suffix in (".jsonl", ".ndjson"):
        byte = re.search(r"at byte (\d+)", text)
        if "non-record" in text:
            return f"{path}: each line must be a JSON object"
        reason = re.search(r"line \d+: ([^\n]*)", text)
        detail = reason.group(1).strip().rstrip(".") if reason else _first_line(text)
        return f"{path}: not valid JSON lines{f' at byte {byte.group(1)}' if byte else ''} ({detail})"
    return f"{path}: not a readable Parquet file ({_first_line(text)})"


def _first_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return first.split("Error: ", 1)[-1]
