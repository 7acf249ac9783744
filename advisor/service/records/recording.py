"""Records of live requests: per-worker append-only segments, ingested into the one DuckDB store.

DuckDB allows one writer, and the service may run as several workers or replicas, so no worker opens the
store. Each worker appends its records (one JSON line per decision and per attempt, flushed per request) to
its own segment file in a spool folder (by default ``<store>.live/``), named ``<worker>-<pid>-<n>.open`` while
it is written. A segment is closed (renamed to ``.jsonl``) once it is a second old or holds 5,000 lines, and
when the worker stops. `ingest` moves closed segments, and the open segments of processes that are gone
(a crash), into the store in one transaction per segment and deletes them; rows are keyed by decision id and
attempt, so ingesting a segment twice adds nothing. ``advisor serve`` ingests every few seconds and once more
after its workers stopped; ``advisor store ingest`` does the same by hand (e.g. for replicas on other hosts
writing to a shared spool folder). A torn last line (a worker killed mid-write) is skipped and counted; any
other bad line is quarantined beside the spool (`advisor.service.records.spool_lines`) and the rest ingested.

**A full disk** loses nothing the service answered: a write that fails (``ENOSPC``, a quota, an I/O error) is
cut back off the segment (no torn line for the next record to merge into) and its records wait in memory,
written before anything else once the disk takes them again (tried by the next write and every `ROTATE_S` by
the app's tick). Meanwhile `SegmentWriter.refusal` says why, and the service answers new requests 503
(``cannot_record``) rather than answer what it could not record; ``/readyz`` says ``degraded``. One log line
when writing fails and one when it works again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import RecordsRejected
from advisor.service.records.spool_lines import Segment, read_segment, set_aside

if TYPE_CHECKING:
    from advisor.store.protocols import LiveRecords

ROTATE_S = 1.0
ROTATE_LINES = 5000
log = logging.getLogger("advisor.recording")


def spool_for(store_path: str | Path) -> Path:
    """The default spool folder of a store file."""
    return Path(f"{store_path}.live")


class SegmentWriter:
    """Appends one worker's records to its own segment files (thread-safe, written to the OS per `write`)."""

    before_reply = False  #: records are written once the response is sent (`advisor.service.http.response.answering`)

    def __init__(self, spool: str | Path, worker: str, on_close=None):
        self.spool = Path(spool)
        self.on_close = on_close  #: called with a segment's closed path (`advisor.service.records.shipping`)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.worker = worker
        self._lock = threading.Lock()
        self._n = 0
        self._file = None
        self._opened = 0.0
        self._lines = 0
        self._size = 0  #: bytes of the open segment that are whole records
        self._backlog: list[tuple[bytes, int]] = []  #: (lines, records) the disk did not take yet
        self.trouble: str | None = None  #: why records are only in memory now, else None

    def _path(self, suffix: str) -> Path:
        return self.spool / f"{self.worker}-{os.getpid()}-{self._n:06d}{suffix}"

    def write(self, records: list[dict[str, Any]]) -> str:
        """Append records (decision and attempts of one request) and write them to the OS; the segment's name
        ("" when the disk did not take them: they wait in memory, see the module docstring)."""
        data = "".join(json.dumps(r, default=str, separators=(",", ":")) + "\n" for r in records).encode("utf-8")
        with self._lock:
            if self._file is not None and (self._lines >= ROTATE_LINES or time.monotonic() - self._opened > ROTATE_S):
                self._close()
            self._backlog.append((data, len(records)))
            if not self._drain():
                return ""
            return Path(self._file.name).stem

    def refusal(self) -> str | None:
        """Why the service cannot record a request now (records wait in memory), else None."""
        return self.trouble

    def health(self) -> dict[str, Any]:
        """What /readyz reports about records: nothing while they are written, else ``degraded`` and why."""
        if self.trouble is None:
            return {}
        return {"records": "degraded", "records_detail": self.trouble,
                "records_in_memory": sum(n for _, n in self._backlog)}

    def _drain(self) -> bool:
        """Write the waiting records in order (under the lock); False when the disk refused them."""
        try:
            while self._backlog:
                self._append(*self._backlog[0])
                self._backlog.pop(0)
        except OSError as exc:
            if self.trouble is None:
                self.trouble = (f"cannot write records to {self.spool} ({exc.strerror or exc}): they wait in "
                                "memory, and new requests get 503 until the disk takes them")
                log.warning("recording: %s", self.trouble)
            return False
        if self.trouble is not None:
            self.trouble = None
            log.warning("recording: records are written to %s again; none was lost", self.spool)
        return True

    def _append(self, data: bytes, records: int) -> None:
        """Append whole lines to the open segment; a failed write is cut back off (OSError raised)."""
        if self._file is None:
            self._n += 1
            self._file = self._path(".open").open("ab", buffering=0)
            self._opened, self._lines, self._size = time.monotonic(), 0, 0
        done = 0
        try:
            while done < len(data):
                done += self._file.write(memoryview(data)[done:])
        except OSError:
            if done:
                os.ftruncate(self._file.fileno(), self._size)  # no torn line for the next write to merge into
            raise
        self._size += len(data)
        self._lines += records

    def rotate_if_old(self) -> None:
        """Write the records the disk refused, close the current segment when it is older than ROTATE_S (called
        periodically by the app)."""
        with self._lock:
            if self._backlog:
                self._drain()
            if self._file is not None and time.monotonic() - self._opened > ROTATE_S:
                self._close()

    def _close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()
            closed = f.name[: -len(".open")] + ".jsonl"
            os.replace(f.name, closed)
            if self.on_close is not None:
                self.on_close(Path(closed))

    def close(self) -> None:
        """Write what waits in memory and close the current segment (it becomes ingestible)."""
        with self._lock:
            if self._backlog and not self._drain():
                log.error("recording: %d records could not be written to %s (%s) and are lost with this worker",
                          sum(n for _, n in self._backlog), self.spool, self.trouble)
            self._close()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ingestible(spool: Path, min_age_s: float = 0.0) -> list[Path]:
    out = sorted(spool.glob("*.jsonl"))
    if min_age_s > 0:
        out = [p for p in out if _age(p) >= min_age_s]
    for path in sorted(spool.glob("*.open")):
        try:
            pid = int(path.stem.rsplit("-", 2)[-2])
        except (ValueError, IndexError):
            continue
        if not _pid_alive(pid):
            out.append(path)
    return out


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def split_records(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], ...]:
    """(decision rows, attempt rows, capture records) of spooled records, without their ``record`` tag,
    timestamps as datetimes, the decision and attempt lists each with one column set (the union of its keys, in
    order); capture records as written (`advisor.service.records.capture`)."""
    decisions, attempts, captures = [], [], []
    for rec in records:
        rec = dict(rec)
        kind = rec.pop("record", None)
        {"decision": decisions, "capture": captures}.get(kind, attempts).append(_timestamps(rec))
    for rows in (decisions, attempts):
        keys = list(dict.fromkeys(k for r in rows for k in r))
        rows[:] = [{k: r.get(k) for k in keys} for r in rows]
    return decisions, attempts, captures


def _timestamps(row: dict[str, Any]) -> dict[str, Any]:
    if isinstance(row.get("created_at"), str):
        row["created_at"] = datetime.fromisoformat(row["created_at"])
    return row


def add_segment(store: LiveRecords, path: Path, spool: Path, segment: Segment) -> tuple[int, int]:
    """Add a segment's records in one transaction; when the store refuses them for what they hold, one by one,
    quarantining each refused record (`spool_lines.set_aside`). A store that fails for its own state (down, full)
    raises: the segment stays for the next ingest."""
    try:
        return store.add_live(*split_records(segment.records))
    except RecordsRejected:
        pass
    added, refused = [0, 0], []
    for i, rec in enumerate(segment.records):
        try:
            one = store.add_live(*split_records([rec]))
        except RecordsRejected as exc:
            refused.append((i, str(exc)))
            continue
        added = [added[0] + one[0], added[1] + one[1]]
    if refused:
        set_aside(path, spool, segment, refused)
    return added[0], added[1]


def ingest(spool: str | Path, store: LiveRecords, min_age_s: float = 0.0) -> dict[str, int]:
    """Move every ingestible segment of `spool` into `store` (a `advisor.store.LiveRecords`: DuckDB or
    PostgreSQL); return counts (segments, decisions, attempts, torn, quarantined lines). With `min_age_s`, closed segments younger
    than that are left to the worker shipping them (`advisor.service.records.shipping`). A segment another process
    removed meanwhile (it shipped it) is skipped."""
    spool = Path(spool)
    counts = {"segments": 0, "decisions": 0, "attempts": 0, "torn_lines": 0, "quarantined_lines": 0}
    if not spool.is_dir():
        return counts
    for path in _ingestible(spool, min_age_s):
        try:  # a bad line is quarantined beside the spool with one warning (advisor.service.records.spool_lines)
            segment = read_segment(path, spool)
        except FileNotFoundError:
            continue
        counts["torn_lines"] += segment.torn
        added = add_segment(store, path, spool, segment)
        counts["quarantined_lines"] += len(segment.bad)  # bad lines, and records the store refused
        counts["segments"] += 1
        counts["decisions"] += added[0]
        counts["attempts"] += added[1]
        path.unlink(missing_ok=True)
    return counts
