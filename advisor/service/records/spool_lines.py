"""Reading one spool segment line by line: a bad line is quarantined, never the end of the ingest.

A segment line is one record: a JSON object tagged ``"record": "decision"`` or ``"attempt"`` with its
``decision_id`` (an attempt also its ``attempt`` number), or ``"capture"``: a captured step (with its
``decision_id``) or a drop (with ``dropped``, why: `advisor.service.records.capture`). A line that is not UTF-8, not JSON, not such an object
(a disk error, a hand edit, another program writing into the spool) is appended byte for byte to
``<spool>.quarantine/<segment>.bad`` beside the spool, one warning line names the segment and its line numbers,
and the segment's other lines are ingested. A record that parses but that the store refuses for what it holds (a
wrong type, an unknown column: `advisor.errors.RecordsRejected`) goes the same way, with the store's reason, once
the segment's records were tried one by one. A torn last line (no newline: a worker killed mid-write) is only
counted: it never held a whole record.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("advisor.spool")

KINDS = ("decision", "attempt", "capture")
_SHOWN = 10  #: line numbers named in the warning, at most


@dataclass
class Segment:
    """The records of one segment, and what was set aside."""

    records: list[dict[str, Any]] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)  #: each record's 1-based line number
    torn: int = 0  #: a last line cut short
    bad: list[int] = field(default_factory=list)  #: 1-based numbers of quarantined lines


def quarantine_folder(spool: str | Path) -> Path:
    """Where a spool's bad lines are kept: ``<spool>.quarantine`` beside it (never ingested)."""
    spool = Path(spool)
    return spool.with_name(spool.name + ".quarantine")


def problem(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(the record, None) or (None, what is wrong with the line)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte {exc.start})"
    try:
        rec = json.loads(text)
    except ValueError:
        return None, "not JSON"
    if not isinstance(rec, dict):
        return None, f"a JSON {type(rec).__name__}, not a record object"
    if rec.get("record") not in KINDS:
        return None, "no 'record' tag decision, attempt or capture"
    if rec["record"] == "capture" and isinstance(rec.get("dropped"), str):
        return rec, None
    if not isinstance(rec.get("decision_id"), str) or (rec["record"] == "attempt"
                                                        and not isinstance(rec.get("attempt"), int)):
        return None, "no decision_id (or attempt number)"
    return rec, None


def read_segment(path: Path, spool: Path) -> Segment:
    """Parse a segment file; quarantine its bad lines (see the module docstring). FileNotFoundError passes."""
    data = path.read_bytes()
    out = Segment()
    lines = data.split(b"\n")
    last_torn = not data.endswith(b"\n")
    if not last_torn:
        lines.pop()  # the empty piece after the final newline
    bad: list[tuple[int, bytes, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        rec, why = problem(line)
        if rec is not None:
            out.records.append(rec)
            out.numbers.append(number)
        elif last_torn and number == len(lines):
            out.torn += 1
        else:
            bad.append((number, line, why or "bad"))
    if bad:
        _quarantine(path, spool, bad)
        out.bad = [n for n, _, _ in bad]
    return out


def set_aside(path: Path, spool: Path, segment: Segment, refused: list[tuple[int, str]]) -> None:
    """Quarantine the records (by index in `segment.records`, with the store's reason) that parsed but that the
    store refused for what they hold; the segment's other records were added."""
    bad = [(segment.numbers[i], json.dumps(segment.records[i]).encode(), why) for i, why in refused]
    _quarantine(path, spool, bad)
    segment.bad.extend(n for n, _, _ in bad)


def _quarantine(path: Path, spool: Path, bad: list[tuple[int, bytes, str]]) -> None:
    folder = quarantine_folder(spool)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{path.stem}.bad"
    with target.open("ab") as fh:
        for _, line, _ in bad:
            fh.write(line + b"\n")
    shown = ", ".join(f"{n} ({why})" for n, _, why in bad[:_SHOWN]) + (" ..." if len(bad) > _SHOWN else "")
    log.warning("spool: %s: %d bad line(s) moved to %s, the rest ingested: line %s", path, len(bad), target, shown)
