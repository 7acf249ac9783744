"""Live records to PostgreSQL: each worker ships its decisions and attempts in batches from a bounded queue.

With ``advisor serve --store postgresql://...`` a worker's `DatabaseRecorder` takes the place of the plain
segment writer (`advisor.service.records.recording.SegmentWriter`), and keeps it underneath:

1. `write` appends the request's records to the worker's local spool segment first (flushed to the OS before
   a JSON answer is sent, so a killed process has lost no answered request; a stream's as it ends), then puts
   them on a bounded queue
   (never blocks: when the queue is full the records stay in the segment only).
2. A thread takes up to `batch` records at a time from the queue and inserts them into PostgreSQL in one
   transaction (`PostgresStore.add_live`: ``ON CONFLICT DO NOTHING`` on decision id and attempt, so a record
   shipped twice is stored once). A closed segment all of whose records were shipped is deleted.
3. When the database cannot be reached the batch stays in its segment, which is then left for the drain; the
   recorder says it is degraded (``/readyz`` reports it) and retries the connection every `retry_s` seconds.
4. The drain (``advisor serve``'s periodic ingest, and ``advisor store ingest --store postgresql://...``)
   moves segments older than a few seconds, and those of killed processes, into the database once it is
   back: nothing is lost, and the keys make it idempotent.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

from advisor.errors import RecordsRejected, first_line
from advisor.service.records.recording import SegmentWriter, split_records
from advisor.store import Reconnecting

QUEUE_REQUESTS = 20_000  #: requests waiting for the database, at most (their records stay in the spool past it)
BATCH = 1_000
LINGER_S = 0.05


class DatabaseRecorder:
    """One worker's records: spool segment first, then batched into PostgreSQL (see the module docstring)."""

    before_reply = True  #: `advisor.service.http.response.answering` writes the records before it answers

    def __init__(self, spool: str | Path, worker: str, url: str, queue_size: int = QUEUE_REQUESTS,
                 batch: int = BATCH, retry_s: float = 1.0):
        self.url, self.batch, self.retry_s = url, batch, retry_s
        self.segments = SegmentWriter(spool, worker, on_close=self._closed)
        self.queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._pending: dict[str, list] = {}  #: segment name -> [lines written, lines shipped, dirty, closed]
        self._db = Reconnecting(self.url)
        self._stop = threading.Event()
        self.degraded: str | None = None  #: why records are not reaching the database now, else None
        self.shipped = 0
        self.spooled_only = 0  #: records left to the drain (queue full or database down)
        self._thread = threading.Thread(target=self._run, name="advisor-ship", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- the request side (event loop)
    def write(self, records: list[dict[str, Any]]) -> str:
        """Append to the spool segment, then queue for the database; the segment's name."""
        name = self.segments.write(records)  # "" when the disk is full: the records wait in its memory
        if name:
            with self._lock:
                seg = self._pending.setdefault(name, [0, 0, False, False])
                seg[0] += len(records)
        try:
            self.queue.put_nowait((name, records))
        except queue.Full:
            self._dirty([name], len(records))
        return name

    def rotate_if_old(self) -> None:
        """Close the current segment when it is old (called periodically by the app)."""
        self.segments.rotate_if_old()

    def refusal(self) -> str | None:
        """Why the service cannot record a request now (the spool's disk is full), else None."""
        return self.segments.refusal()

    def health(self) -> dict[str, Any]:
        """What /readyz reports about records."""
        if self.segments.trouble:
            return {**self.segments.health(), "records_queued": self.queue.qsize(), "records_shipped": self.shipped}
        return {"records": "degraded" if self.degraded else "database", "records_detail": self.degraded,
                "records_queued": self.queue.qsize(), "records_shipped": self.shipped,
                "records_spooled_only": self.spooled_only}

    def close(self, timeout_s: float = 10.0) -> None:
        """Close the segment, ship what is queued (for at most `timeout_s`), stop the thread."""
        self.segments.close()
        self._stop.set()
        self._thread.join(timeout_s)
        self._disconnect()

    # ----------------------------------------------------------------- segment bookkeeping
    def _closed(self, path: Path) -> None:
        with self._lock:
            seg = self._pending.get(path.stem)
            if seg is not None:
                seg[3] = True
                self._settle(path.stem, seg)

    def _settle(self, name: str, seg: list) -> None:
        """Delete a closed segment once everything in it is in the database; a dirty one is left to the drain."""
        written, shipped, dirty, closed = seg
        if not closed or not (dirty or shipped >= written):
            return
        del self._pending[name]
        if not dirty:
            (self.segments.spool / f"{name}.jsonl").unlink(missing_ok=True)

    def _dirty(self, names: list[str], records: int) -> None:
        with self._lock:
            self.spooled_only += records
            for name in names:
                seg = self._pending.get(name)
                if seg is not None:
                    seg[2] = True

    # ----------------------------------------------------------------- the shipping thread
    def _take(self) -> list[tuple[str, list[dict[str, Any]]]]:
        try:
            items = [self.queue.get(timeout=0.2)]
        except queue.Empty:
            return []
        end, count = time.monotonic() + LINGER_S, len(items[0][1])
        while count < self.batch:
            try:
                item = self.queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            items.append(item)
            count += len(item[1])
        return items

    def _connect(self):
        return self._db.store()

    def _disconnect(self) -> None:
        self._db.close()

    def _probe(self, first: bool = False) -> float:
        """Connect once; clear `degraded` when that works (set it when the `first` probe fails). The next retry
        time."""
        try:
            self._db.ping()
        except Exception as exc:  # noqa: BLE001 - still down
            self._disconnect()
            if first:
                self._down(exc)
            return time.monotonic() + self.retry_s
        self.degraded = None
        return 0.0

    def _down(self, exc: BaseException) -> None:
        why = first_line(exc) or type(exc).__name__
        self.degraded = f"PostgreSQL unreachable ({why}); records spooled to {self.segments.spool} until it is back"

    def _run(self) -> None:
        retry_at = self._probe(first=True)  # at start: /readyz says degraded on every worker, requests or not
        while not (self._stop.is_set() and self.queue.empty()):
            items = self._take()
            if not items:
                if self.degraded and time.monotonic() >= retry_at:  # idle: is the database back?
                    retry_at = self._probe()
                continue
            names = [n for n, _ in items]
            records = sum(len(r) for _, r in items)
            if time.monotonic() < retry_at:  # the database was down a moment ago: the drain has these
                self._dirty(names, records)
                continue
            try:
                self._connect().add_live(*split_records([rec for _, recs in items for rec in recs]))
            except RecordsRejected:  # a record the database refuses: the drain's ingest quarantines it
                self._dirty(names, records)
                continue
            except Exception as exc:  # noqa: BLE001 - whatever failed, the records are in the spool
                self._dirty(names, records)
                self._disconnect()
                self._down(exc)
                retry_at = time.monotonic() + self.retry_s
                continue
            self.degraded = None
            with self._lock:
                self.shipped += records
                for name, recs in items:
                    seg = self._pending.get(name)
                    if seg is not None:
                        seg[1] += len(recs)
                        self._settle(name, seg)
