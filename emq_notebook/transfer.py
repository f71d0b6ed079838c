"""Export, import and move: a queue's jobs kept as a file, a file's jobs added to a
queue, and jobs moved to another queue exactly once.

- `export_jobs` writes the jobs of one state set (those whose `last_error` matches a
  glob, or all) to `.jsonl`, `.jsonl.gz` or `.parquet`: one record a job, its `id`, its
  `state`, `at` (the set's score for a timed set: died at, due, lease deadline) and
  every field of its row by its wire name. A read: it writes no key and records nothing.
- `import_jobs` adds the jobs of such a file to a queue, every record checked before
  the first write, an id the queue holds already skipped; one audit entry.
- `move_jobs` moves jobs to another queue (a quarantine). Two queues are two cluster
  slots, so no one call holds both; a journal in the source's slot makes it exactly
  once (below). Audited in both queues' streams.

Records. A value is text as the row holds it; bytes that are not UTF-8 are
`{"base64": ...}` in JSON Lines and every value is binary in Parquet, so a round trip
gives the row back byte for byte. A row holding a field named `id` or `at`, or a field
no read copies (`read_rows`), is left out of an export and said so.

A move, batch by batch (`budget` jobs a batch), each step one bounded call:
1. source slot (`@move_take`): the batch leaves its set for the journal
   `emq:{source}:moving:<batch>` (id -> state and score); `emq:{source}:moving` names the
   batch, its owner (the connection's token), a lease and the target.
2. target slot (`@move_put`): each row, its `:logs` and its set membership written, its
   id added to `emq:{target}:arrived:<batch>` (so it is never written twice). An
   identical row under the id: `same`; another job under it: `conflict`, nothing
   written, the job stays in the source.
3. source slot (`@move_clear`, its owner only): the rows the target holds are deleted,
   the others put back at their score, the journal cleared; then the arrived set.
Any later call (a move, `finish_moves`) first finishes what the journal holds: its own
batches at once, another owner's once its lease has passed or with `take_over=True`.
Killed at any point, a re-run leaves every job in exactly one queue. Not closed: an owner
that stalls past its lease between reading and writing a batch while another finishes it
and a target worker deletes one of its jobs (the stalled write adds it again); and a
server restart that forgets acknowledged writes of one slot and not the other's.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import math
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import admin, audit, checks, decoding, jobs, moves, triage
from .catalogue import contract
from .checks import whole
from .connector import Connection
from .defaults import (
    ARRIVED_MS,
    BYTE_BUDGET,
    DEFAULT_BUDGET,
    ID_BUDGET,
    ID_WORK,
    MAX_PAYLOAD,
    MAX_WHOLE_FIELD,
    MOVE_LEASE_MS,
    MOVE_LOG_LINES,
)
from .errors import BadInput, BadRecord, EMQError, InvalidName
from .frames import BATCH
from .keyspace import (
    ROW_WHOLES,
    STATES,
    arrived_key,
    base,
    check_batch,
    check_name,
    check_server_id,
    job_key,
    lane_key,
    logs_key,
    moving_batch_key,
    moving_key,
    new_batch,
    queue_key,
)

Progress = Callable[[int, int], None]

# the file formats, by suffix
JSONL, JSONL_GZ, PARQUET = ".jsonl", ".jsonl.gz", ".parquet"
FORMATS = (JSONL, JSONL_GZ, PARQUET)
# a record's own keys; every other key is a field of the row
RECORD_KEYS = ("id", "state", "at")
# the states a move takes jobs from (an active job is in a worker's hands), an import puts them in
MOVE_STATES = ("pending", "schedule", "dead")
IMPORT_STATES = ("pending", "dead")
# the sets whose score is a time (`at`)
TIMED = ("active", "schedule", "dead")
# jobs an export reads a page (one `triage.find` page, then their rows)
PAGE = 500
# records a Parquet row group holds
PARQUET_ROWS = 10_000
# the row fields whose text must be a whole number, as every transition reads them
WHOLE_FIELDS = tuple(name for name, _ in ROW_WHOLES)
_WHOLE = re.compile(r"-?(?:0|[1-9][0-9]{0,16})\Z")
# fields a record may hold (a row of more is one HSET of as many)
MAX_FIELDS = jobs.ROW_FIELDS


def suffix_of(path: str | os.PathLike[str]) -> str:
    """The format of `path` by its suffix (`FORMATS`), else `BadInput` before any I/O."""
    name = os.fspath(path).lower()
    for suffix in (JSONL_GZ, JSONL, PARQUET):
        if name.endswith(suffix):
            return suffix
    raise BadInput(f"{os.fspath(path)!r}: the file is .jsonl, .jsonl.gz or .parquet")


# -- reading whole rows ------------------------------------------------------------------


@dataclass
class Row:
    """A job row read whole: its fields (name -> text, in the row's order) and, for a
    move, its log lines."""

    fields: dict[str, str]
    lines: list[str]


def read_rows(conn: Connection, q: str, ids: list[str], cap: int, logs: bool = False) -> dict[str, Row | str]:
    """Every field of the rows of `ids` (ids as the server holds them), by bounded
    `@read_whole_rows` calls (at most `frames.BATCH` ids and about `BYTE_BUDGET` bytes a
    call, no field over `BYTE_BUDGET` copied in a script); a field over that is read by a
    plain HGET up to `cap` bytes. Answers id -> `Row`, or the word saying why not:
    `gone` (no row), `bad_row` (a key of another type), `too_large` (a field over `cap`
    bytes, or a row over `cap` in all), `unread` (a row holding fields other than the
    job's own, `jobs.JOB_FIELDS`, that the server could not measure whole before listing
    its names: of more than 64 fields, over `BYTE_BUDGET`, or on a server or for an ACL
    user without MEMORY USAGE; the in-process server lists any row of up to 64 fields,
    as no other client shares it). With `logs`, each row's
    `:logs` lines too, read in pages (`jobs.read_logs`): more than `MOVE_LOG_LINES`
    lines, or over `BYTE_BUDGET` bytes of them, is `logs_long`."""
    out: dict[str, Row | str] = {}
    unlisted = "1" if conn.in_process else ""
    head = [BYTE_BUDGET, BYTE_BUDGET, unlisted, len(jobs.JOB_FIELDS), *jobs.JOB_FIELDS]
    start = 0
    while start < len(ids):
        batch = decoding.batch(ids, start, BATCH, BYTE_BUDGET)
        got = conn.run("read_whole_rows", [base(q)], [*head, *batch], verb="jobs", queue=q)
        if not got:  # every call reads one row at least: this is a script's bug
            raise EMQError(f"read_whole_rows answered no row for {len(batch)} ids")
        for job_id, reply in zip(batch, got, strict=False):
            out[job_id] = _row_of(conn, q, job_id, reply, cap)
        start += len(got)
    if logs:
        _add_logs(conn, q, out)
    return out


def _row_of(conn: Connection, q: str, job_id: str, reply: Any, cap: int) -> Row | str:
    if reply == -1:
        return "gone"
    if reply == 0:
        return "bad_row"
    count, listed, *pairs = reply
    fields = dict(zip(pairs[0::2], pairs[1::2], strict=True))
    if not listed and int(count) > len(fields):
        return "unread"
    sizes = {n: v for n, v in fields.items() if isinstance(v, int)}
    if any(size > cap for size in sizes.values()):
        return "too_large"
    if sizes:
        # the fields over what a script copies: a plain HGET each (one round trip)
        key = job_key(q, job_id, gate=False)
        pipe = conn.pipeline()
        for name in sizes:
            pipe.hget(decoding.wire(key), decoding.wire(name))
        for name, value in zip(sizes, pipe.execute(), strict=True):
            if value is None:
                del fields[name]
            else:
                fields[name] = value
    most = max(cap, BYTE_BUDGET)
    # a character is 4 bytes at most: most rows are settled here at C speed
    if (sum(map(len, fields)) + sum(map(len, fields.values()))) * 4 > most and row_bytes(fields) > most:
        return "too_large"
    return Row(fields, [])


def row_bytes(fields: dict[str, str]) -> int:
    """The bytes a row's names and values take on the wire."""
    return sum(decoding.wire_size(n) + decoding.wire_size(v) for n, v in fields.items())


def _add_logs(conn: Connection, q: str, rows: dict[str, Row | str]) -> None:
    """Each row's `:logs` lines, or `logs_long` in its place."""
    found = [(i, r) for i, r in rows.items() if isinstance(r, Row)]
    pipe = conn.pipeline()
    for job_id, _ in found:
        pipe.llen(decoding.wire(logs_key(q, job_id, gate=False)))
    for (job_id, row), n in zip(found, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(n, Exception):
            rows[job_id] = "bad_row"
        elif n > MOVE_LOG_LINES:
            rows[job_id] = "logs_long"
        elif n:
            lines = jobs.read_logs(conn, q, job_id, job_key(q, job_id, gate=False), None)
            if sum(map(decoding.wire_size, lines)) > BYTE_BUDGET:
                rows[job_id] = "logs_long"
            else:
                row.lines = list(lines)


# -- records -------------------------------------------------------------------------------


def _bytes_of(text: str) -> bytes:
    return text.encode("utf-8", decoding.ERRORS)


def _json_value(text: str) -> Any:
    """A row's text as a JSON value: itself, or `{"base64": ...}` when it holds bytes
    that are not UTF-8."""
    if decoding.undecodable(text):
        return {"base64": base64.b64encode(_bytes_of(text)).decode("ascii")}
    return text


def record(job_id: str, state: str, at: float | None, fields: dict[str, str]) -> dict[str, Any]:
    """One job as a JSON Lines record: `id`, `state`, `at` (for a timed set), then every
    field but `state` by its wire name."""
    out: dict[str, Any] = {"id": _json_value(job_id), "state": state}
    if at is not None:
        out["at"] = int(at) if float(at).is_integer() else at
    for name, value in fields.items():
        if name != "state":
            out[name] = _json_value(value)
    return out


def _jsonl_line(rec: dict[str, Any]) -> str:
    # a field name that is not UTF-8 is written escaped, the rest as text
    plain = all(not decoding.undecodable(k) for k in rec)
    return json.dumps(rec, ensure_ascii=not plain, separators=(",", ":")) + "\n"


class _JsonLines:
    """Records written one a line, gzipped for `.jsonl.gz`."""

    def __init__(self, path: Path, gz: bool):
        self.file = gzip.open(path, "wt", encoding="utf-8") if gz else open(path, "w", encoding="utf-8")  # noqa: SIM115

    def write(self, job_id: str, state: str, at: float | None, fields: dict[str, str]) -> None:
        self.file.write(_jsonl_line(record(job_id, state, at, fields)))

    def close(self) -> None:
        self.file.close()


def parquet_schema() -> Any:
    """The Parquet file's columns: `id` (binary), `state`, `at` (the set's score), each of
    the job's own fields but `state` (binary, null where the row lacks it), and `other`,
    a map of any other field's name to its value (binary)."""
    import pyarrow as pa

    own = [(f, pa.binary()) for f in jobs.JOB_FIELDS if f != "state"]
    return pa.schema(
        [
            ("id", pa.binary()),
            ("state", pa.string()),
            ("at", pa.float64()),
            *own,
            ("other", pa.map_(pa.binary(), pa.binary())),
        ]
    )


class _Parquet:
    """Records written as row groups of `PARQUET_ROWS`, column by column."""

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self.schema = parquet_schema()
        self.writer = pq.ParquetWriter(path, self.schema)
        self.own = [f for f in jobs.JOB_FIELDS if f != "state"]
        self.rows: list[dict[str, Any]] = []

    def write(self, job_id: str, state: str, at: float | None, fields: dict[str, str]) -> None:
        row: dict[str, Any] = {"id": _bytes_of(job_id), "state": state, "at": at}
        other = []
        for name, value in fields.items():
            if name in self.own:
                row[name] = _bytes_of(value)
            elif name != "state":
                other.append((_bytes_of(name), _bytes_of(value)))
        row["other"] = other
        self.rows.append(row)
        if len(self.rows) >= PARQUET_ROWS:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _writer(path: Path, suffix: str) -> _JsonLines | _Parquet:
    return _Parquet(path) if suffix == PARQUET else _JsonLines(path, suffix == JSONL_GZ)


# -- export --------------------------------------------------------------------------------


class Exported(int):
    """How many jobs an export wrote (an int), with `.path`, and `.left`: {id: why} of
    the jobs it found and did not write (their first `LEFT_SHOWN`), `.left_count` all of
    them (see `read_rows`; `field_named_id_or_at`: a row field a record cannot hold)."""

    path: str
    left: dict[str, str]
    left_count: int

    def __new__(cls, written: int, path: str, left: dict[str, str], left_count: int) -> Exported:
        self = super().__new__(cls, written)
        self.path, self.left, self.left_count = path, left, left_count
        return self

    def __repr__(self) -> str:
        return f"Exported({int(self)} to {self.path!r}, left out {self.left_count})"

    def lines(self) -> list[str]:
        """What was left out, a line: "2 jobs left out: j_1 (too_large), j_2 (gone)"."""
        if not self.left_count:
            return []
        shown = ", ".join(f"{decoding.shown_id(i)} ({w})" for i, w in list(self.left.items())[:5])
        return [f"{self.left_count:,} jobs left out: {shown}" + (", …" if self.left_count > 5 else "")]


LEFT_SHOWN = 100


@contract("export")
def export_jobs(
    conn: Connection,
    q: str,
    path: str | os.PathLike[str],
    *,
    state: str = "dead",
    error: str | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
    budget: int = DEFAULT_BUDGET,
    payload: str | None = None,
    signature: str | None = None,
) -> Exported:
    """Write the jobs of `state`'s set (those whose `last_error` matches the glob `error`,
    or all; at most `limit`) to `path`, one record a job (the module's docstring says a
    record), in set order; answers the count written (`Exported`). `payload` (a glob) and
    `signature` (an error signature, as `triage.errors` names it) narrow it as
    `triage.find` does (extension: what a dead-letter panel's preview shows).

    A read: allowed on a read-only session, recorded nowhere. Paged: a `triage.find` page
    of `PAGE` jobs (each call examining at most `budget` members), then their rows
    (`read_rows`), written as they come, so memory stays flat in the number of jobs.
    The file is written beside `path` as `<path>.part` and renamed at the end: an export
    cut part way leaves no file that looks whole. `progress(pages, written)` after each
    page. Refused before any I/O (`BadInput`): a suffix not in `FORMATS`, a state not in
    `STATES`, a limit that is not a whole number, a budget over `defaults.MAX_BUDGET`.

    script: @read_whole_rows
    precondition: none; a read, in bounded calls (the jobs found by triage.find's)
    writes: nothing (a read)
    replies: int — the jobs written (`.path`, `.left`: those found and not written, and why)
    native: none, read-only scripts (FCALL_RO with the function executor)
    """
    check_name(q)
    target = Path(path)
    suffix = suffix_of(target)
    if state not in STATES:
        raise BadInput(f"unknown state {state!r}: one of {', '.join(STATES)}")
    if limit is not None:
        whole(limit, "limit")
    checks.budget(budget)
    part = target.with_name(target.name + ".part")
    out = _writer(part, suffix)
    written, pages, left_count = 0, 0, 0
    left: dict[str, str] = {}
    try:
        for page, scores in _pages(
            conn, q, state, limit, budget, error=error, payload=payload, signature=signature
        ):
            rows = read_rows(conn, q, [i for i in page if not moves.is_foreign(i)], MAX_WHOLE_FIELD)
            for job_id, score in zip(page, scores, strict=True):
                row = rows.get(job_id, "foreign_id")
                why = row if isinstance(row, str) else _unwritable(row.fields)
                if why:
                    left_count += 1
                    if len(left) < LEFT_SHOWN:
                        left[job_id] = why
                    continue
                assert isinstance(row, Row)
                out.write(job_id, state, score, row.fields)
                written += 1
            pages += 1
            if progress:
                progress(pages, written)
    except BaseException:
        out.close()
        part.unlink(missing_ok=True)
        raise
    out.close()
    os.replace(part, target)
    return Exported(written, os.fspath(target), left, left_count)


def _unwritable(fields: dict[str, str]) -> str:
    return "field_named_id_or_at" if "id" in fields or "at" in fields else ""


def _pages(
    conn: Connection, q: str, state: str, limit: int | None, budget: int, **filters: Any
) -> Iterator[tuple[list[str], list[float | None]]]:
    """The jobs of `state` that `filters` (`triage.find`'s error, payload and signature)
    match, a page at a time: their ids and, for a timed set, their scores."""
    place: triage.Place | None = None
    found = 0
    while limit is None or found < limit:
        want = PAGE if limit is None else min(PAGE, limit - found)
        frame = triage.find(conn, q, state=state, limit=want, budget=budget, after=place, **filters)
        if not len(frame):
            return
        ids = list(frame.index)
        found += len(ids)
        yield ids, _scores(conn, q, state, ids)
        place = frame.attrs["next"]
        if place is None:
            return


def _scores(conn: Connection, q: str, state: str, ids: list[str]) -> list[float | None]:
    """The scores of `ids` in `state`'s set (one ZMSCORE), None for pending (its score is
    the row's priority) and for an id that left the set since."""
    if state not in TIMED:
        return [None] * len(ids)
    got = conn.command("ZMSCORE", queue_key(q, state), *ids)
    return [None if s is None else float(s) for s in got]


# -- import ---------------------------------------------------------------------------------


@dataclass
class Job:
    """One record of an import file, checked: its id, its score (`at`, text; "" for
    none) and its fields (name -> text, as the row will hold them)."""

    id: str
    at: str
    fields: dict[str, str]


def _text_of(value: Any, what: str, line: int) -> str:
    """A record's value as the text the row holds: a string, or `{"base64": ...}`."""
    if isinstance(value, str):
        if decoding.LONE_SURROGATE.search(value):
            raise BadRecord(
                f"line {line}: {what} holds half of a character pair, which no server holds", line
            )
        return value
    if isinstance(value, bytes):  # a Parquet column
        return value.decode("utf-8", decoding.ERRORS)
    if isinstance(value, dict) and list(value) == ["base64"] and isinstance(value["base64"], str):
        try:
            raw = base64.b64decode(value["base64"], validate=True)
        except ValueError:
            raise BadRecord(f"line {line}: {what} is not base64", line) from None
        return raw.decode("utf-8", decoding.ERRORS)
    raise BadRecord(f'line {line}: {what} is text or {{"base64": ...}}, not {type(value).__name__}', line)


def check_record(raw: Any, line: int) -> Job:
    """The job a record says, or `BadRecord` naming its line: an object with an `id` (a
    job id no verb refuses: `keyspace.check_server_id`), an optional `state` (one of
    `STATES`) and `at` (a whole number of ms), and the row's fields: a `payload`, each
    of `WHOLE_FIELDS` it holds a whole number (as every transition reads it), a `group`
    that is not empty, at most `MAX_FIELDS` fields and `defaults.MAX_PAYLOAD` bytes."""
    if not isinstance(raw, dict):
        raise BadRecord(f"line {line}: a record is a JSON object, not {type(raw).__name__}", line)
    if "id" not in raw or raw["id"] is None:
        raise BadRecord(f"line {line}: no id", line)
    job_id = _text_of(raw["id"], "id", line)
    try:
        if not job_id:
            raise InvalidName("job id is empty")
        check_server_id(job_id)
    except InvalidName as exc:
        raise BadRecord(f"line {line}: {exc}", line) from None
    state = raw.get("state")
    if state is not None and state not in STATES:
        raise BadRecord(f"line {line}: state {state!r} is not one of {', '.join(STATES)}", line)
    at = raw.get("at")
    if at is not None:
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
            raise BadRecord(f"line {line}: at is a number of ms, not {at!r}", line)
        if not float(at).is_integer() or not 0 <= at <= checks.MAX_WHOLE:
            raise BadRecord(f"line {line}: at {at!r} is not a whole number of ms", line)
    fields: dict[str, str] = {}
    size = 0
    for name, value in raw.items():
        if name in RECORD_KEYS or value is None:
            continue
        if not isinstance(name, str) or not name:
            raise BadRecord(f"line {line}: a field name is not empty", line)
        text = _text_of(value, f"field {name!r}", line)
        fields[name] = text
        size += decoding.wire_size(name) + decoding.wire_size(text)
    if "payload" not in fields:
        raise BadRecord(f"line {line}: no payload (every job row holds one)", line)
    for name in WHOLE_FIELDS:
        if name in fields and not (_WHOLE.match(fields[name]) and abs(int(fields[name])) <= checks.MAX_WHOLE):
            raise BadRecord(f"line {line}: {name} {fields[name][:40]!r} is not a whole number", line)
    if fields.get("group") == "":
        raise BadRecord(f"line {line}: group is empty", line)
    if len(fields) > MAX_FIELDS:
        raise BadRecord(
            f"line {line}: {len(fields):,} fields, over the {MAX_FIELDS:,} a row is written with", line
        )
    if size > MAX_PAYLOAD:
        raise BadRecord(f"line {line}: {size:,} bytes, over the {MAX_PAYLOAD:,} one write takes", line)
    return Job(job_id, "" if at is None else str(int(at)), fields)


def _raw_records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, the record as read) of each record of `path`; a line that is not
    JSON is `BadRecord`. A blank line is no record."""
    suffix = suffix_of(path)
    if suffix == PARQUET:
        import pyarrow.parquet as pq

        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1000):
            for row in batch.to_pylist():
                n += 1
                other = row.pop("other", None) or []
                for name, value in other:
                    row.setdefault(name.decode("utf-8", decoding.ERRORS), value)
                yield n, row
        return
    opened = gzip.open(path, "rb") if suffix == JSONL_GZ else open(path, "rb")  # noqa: SIM115
    with opened as lines:
        for n, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                yield n, json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise BadRecord(f"line {n}: not a JSON record ({str(exc)[:80]})", n) from None


def records(path: str | os.PathLike[str]) -> Iterator[tuple[int, Job]]:
    """(line number, `Job`) of each record of an export file, each checked
    (`check_record`)."""
    for n, raw in _raw_records(Path(path)):
        yield n, check_record(raw, n)


@dataclass
class Checked:
    """An import file checked whole: its records and its digest (`sha256:` and the
    SHA-256 of its bytes, as stored)."""

    count: int
    digest: str


def check_file(path: str | os.PathLike[str]) -> Checked:
    """Every record of `path` checked (`BadRecord` at the first bad one, with its line),
    and the file's digest. Reads the file, writes nothing."""
    file = Path(path)
    suffix_of(file)
    digest = hashlib.sha256()
    with open(file, "rb") as raw:
        for chunk in iter(lambda: raw.read(1 << 20), b""):
            digest.update(chunk)
    count = sum(1 for _ in records(file))
    return Checked(count, "sha256:" + digest.hexdigest())


class Imported(int):
    """How many jobs an import added (an int), with `.added`, `.skipped` (ids the queue
    held already: left as they were), `.digest` (the file's) and `.dry_run`."""

    added: int
    skipped: int
    digest: str
    dry_run: bool

    def __new__(cls, added: int, skipped: int, digest: str, dry_run: bool = False) -> Imported:
        self = super().__new__(cls, added)
        self.added, self.skipped, self.digest, self.dry_run = added, skipped, digest, dry_run
        return self

    def __repr__(self) -> str:
        would = ", dry run" if self.dry_run else ""
        return f"Imported(added {self.added}, skipped {self.skipped}{would})"


def import_jobs(
    conn: Connection,
    q: str,
    path: str | os.PathLike[str],
    *,
    state: str = "pending",
    dry_run: bool = False,
    budget: int = ID_BUDGET,
    progress: Progress | None = None,
) -> Imported:
    """Add the jobs of export file `path` to queue `q` as `state` (pending or dead):
    each row as its record says (its `state` field the state named), a pending job in
    its lane when grouped, at its priority; a dead one at its `at` (else now). An id
    that has a key in `q` already is skipped and counted (`.skipped`), so importing the
    same file twice adds nothing the second time.

    Every record is checked before anything is written (`BadRecord` with its line
    number; `check_record` says what a record must be), then the jobs go in bounded
    `@import_rows` calls of at most `budget` jobs and about `BYTE_BUDGET` bytes. One
    audit entry, the file's digest in its `args` (`import_file`). `dry_run=True` checks
    the file and answers what would be added and skipped, writing nothing (a read-only
    session may run it). Refused before any I/O: `BadInput` (a state, a suffix, a
    budget over `defaults.MAX_MOVE_BUDGET`), `ReadOnly`."""
    check_name(q)
    if state not in IMPORT_STATES:
        raise BadInput(f"import takes state pending or dead, not {state!r}")
    suffix_of(path)
    checks.move_budget(budget)
    if not dry_run:
        conn.refuse_writes(f"import {q}")
    checked = check_file(path)
    if dry_run:
        return _would_import(conn, q, path, checked, budget)
    return import_file(
        conn, q, os.fspath(path), state=state, digest=checked.digest, budget=budget, progress=progress
    )


@contract("import", writes=True)
@audit.audited("import", bulk=True)
def import_file(
    conn: Connection,
    q: str,
    path: str,
    *,
    state: str,
    digest: str,
    budget: int = ID_BUDGET,
    progress: Progress | None = None,
) -> Imported:
    """`import_jobs` past its checks: the file's jobs written, recorded once with its
    `digest` (`check_file`'s) among the args. A file changed since it was checked (its
    digest differs once read again) raises `BadInput` after the jobs read went in.

    script: @import_rows
    precondition: every record of the file checked first; bounded calls of `budget` jobs
    writes: each new id: its row as the record says, its set (pending: its lane when grouped); publishes
      `imported`
    replies: Imported — int, the jobs added; .added, .skipped (ids held already), .digest
    native: none, a script only
    """
    conn.refuse_writes(f"import {q}")
    added: list[str] = []
    skipped = calls = 0
    digest_now = hashlib.sha256()
    with open(path, "rb") as raw:
        for block in iter(lambda: raw.read(1 << 20), b""):
            digest_now.update(block)
    for chunk in _import_chunks(records(path), budget):
        audit.started()
        argv: list[Any] = [state]
        for job in chunk:
            fields = {**job.fields, "state": state}
            argv += [job.id, job.at, len(fields), *(p for pair in fields.items() for p in pair)]
        words = conn.run("import_rows", [base(q)], argv, verb="import", queue=q)
        now = [job.id for job, word in zip(chunk, words, strict=True) if word == "added"]
        audit.changed(len(now), now)
        added += now
        skipped += len(chunk) - len(now)
        calls += 1
        if progress:
            progress(calls, len(added) + skipped)
    if "sha256:" + digest_now.hexdigest() != digest:
        raise BadInput(
            f"{path} changed while it was imported: {len(added):,} jobs added from it as it was read"
        )
    return Imported(len(added), skipped, digest)


def _import_chunks(found: Iterable[tuple[int, Job]], most: int) -> Iterator[list[Job]]:
    """The file's jobs a call at a time: at most `most` and about `BYTE_BUDGET` bytes
    (one job at least), as `jobs.enqueue_many` cuts its calls."""
    chunk: list[Job] = []
    size = 0
    for _, job in found:
        weight = decoding.wire_size(job.id) * ID_WORK + row_bytes(job.fields)
        if chunk and (len(chunk) >= most or size + weight > BYTE_BUDGET):
            yield chunk
            chunk, size = [], 0
        chunk.append(job)
        size += weight
    if chunk:
        yield chunk


def _would_import(
    conn: Connection, q: str, path: str | os.PathLike[str], checked: Checked, budget: int
) -> Imported:
    """What `import_jobs` would add and skip on the queue as it is: one EXISTS a job,
    pipelined a chunk at a time. Reads only."""
    seen: set[str] = set()
    added = skipped = 0
    for chunk in _import_chunks(records(path), budget):
        pipe = conn.pipeline()
        for job in chunk:
            pipe.exists(decoding.wire(job_key(q, job.id, gate=False)))
        for job, there in zip(chunk, pipe.execute(), strict=True):
            if there or job.id in seen:
                skipped += 1
            else:
                added += 1
                seen.add(job.id)
    return Imported(added, skipped, checked.digest, dry_run=True)


# -- move -----------------------------------------------------------------------------------

# what a move's step 2 answers for a job now in the target
IN_TARGET = ("moved", "same")


class MoveResult(int):
    """How many jobs a move moved (an int: `.moved`, those of earlier batches it finished
    among them, `.finished`), with `.ids` (the jobs moved), `.same` (of those, the ones
    the target held already, identical), `.stayed` ({id: why} of the jobs found that
    stayed where they were: `conflict` (the target holds another job under that id),
    `not_<state>`, `gone`, `bad_row`, `foreign_id`, `too_large`, `unread`,
    `logs_long`), `.busy` ([(batch, lease end ms, target)] of earlier batches another
    client holds), and `.dry_run` (then `moved` says what would move)."""

    moved: int
    ids: list[str]
    same: int
    finished: int
    stayed: dict[str, str]
    busy: list[tuple[str, int, str]]
    dry_run: bool

    def __new__(
        cls,
        ids: list[str],
        same: int = 0,
        finished: int = 0,
        stayed: dict[str, str] | None = None,
        busy: list[tuple[str, int, str]] | None = None,
        dry_run: bool = False,
    ) -> MoveResult:
        self = super().__new__(cls, len(ids))
        self.moved, self.ids, self.same, self.finished = len(ids), ids, same, finished
        self.stayed, self.busy, self.dry_run = stayed or {}, busy or [], dry_run
        return self

    def __repr__(self) -> str:
        would = ", dry run" if self.dry_run else ""
        said = f"moved {self.moved}, same {self.same}, stayed {len(self.stayed)}, busy {len(self.busy)}"
        return f"MoveResult({said}{would})"

    def lines(self) -> list[str]:
        """What stayed and what waits, a line each, for a person."""
        out = []
        if self.finished:
            out.append(f"{self.finished:,} of them from a move an earlier call left part way")
        if self.same:
            out.append(f"{self.same:,} the target held already, identical (left there once)")
        for why, n in sorted(Counter(self.stayed.values()).items()):
            sample = ", ".join(str(decoding.shown_id(i)) for i, w in self.stayed.items() if w == why)
            out.append(f"{n:,} {'would stay' if self.dry_run else 'stayed'} ({why}): {sample[:200]}")
        for batch, until, target in self.busy:
            out.append(
                f"batch {batch} (to {target}) is another client's until {until} ms: run again after, "
                "or finish it with take_over (--take-over) if that client is gone"
            )
        return out


class _Mover:
    """One call's moves out of `source`: its batches taken, carried and cleared (the
    module's docstring: steps 1 to 3), and what came of each job."""

    def __init__(self, conn: Connection, source: str, budget: int, take_over: bool = False):
        self.conn, self.source, self.budget, self.take_over = conn, source, budget, take_over
        self.owner = conn.token
        self.ids: list[str] = []
        self.same = self.finished = 0
        self.stayed: dict[str, str] = {}
        self.busy: list[tuple[str, int, str]] = []
        self.into: Counter[str] = Counter()
        self.into_ids: dict[str, list[str]] = {}
        # targets to pause before the first job is written into them, when they are new
        self.pause_new: set[str] = set()

    def result(self) -> MoveResult:
        return MoveResult(self.ids, self.same, self.finished, self.stayed, self.busy)

    def finish(self) -> None:
        """Finish every batch the journal holds that this call may hold (`@move_hold`)."""
        for batch in self._batches():
            held = self.conn.run(
                "move_hold",
                [base(self.source)],
                [batch, self.owner, MOVE_LEASE_MS, "force" if self.take_over else ""],
                verb="move",
                queue=self.source,
            )
            if held[0] == "busy":
                self.busy.append((batch, int(held[1]), held[2]))
            elif held[0] == "held":
                before = len(self.ids)
                self.carry(batch, held[1], self._entries(batch))
                self.finished += len(self.ids) - before

    def _batches(self) -> list[str]:
        """The batches the journal names (read whole: a journal holds the batches of the
        calls cut part way, a few). One whose name is not a batch's is left alone."""
        names = []
        cursor = "0"
        while True:
            cursor, page = self.conn.command("HSCAN", moving_key(self.source), cursor, "COUNT", 100)
            names += [n for n in page if checks.passes(check_batch, n)]
            if int(cursor) == 0:
                return sorted(set(names))

    def _entries(self, batch: str) -> dict[str, tuple[str, str]]:
        """A batch's jobs in the journal: id -> (state, score)."""
        out: dict[str, tuple[str, str]] = {}
        cursor = "0"
        while True:
            cursor, page = self.conn.command(
                "HSCAN", moving_batch_key(self.source, batch), cursor, "COUNT", 100
            )
            for job_id, held in page.items():
                state, _, score = held.partition(" ")
                out[job_id] = (state, score)
            if int(cursor) == 0:
                return out

    def take(self, ids: list[str], state: str, target: str) -> None:
        """Step 1 for `ids` (one batch), then steps 2 and 3 for those taken."""
        batch = new_batch()
        reply = self.conn.run(
            "move_take",
            [base(self.source)],
            [state, batch, self.owner, MOVE_LEASE_MS, target, *ids],
            verb="move",
            queue=self.source,
        )
        taken: dict[str, tuple[str, str]] = {}
        for job_id, word, score in zip(ids, reply[0::2], reply[1::2], strict=True):
            if word == "taken":
                taken[job_id] = (state, score)
            else:
                self.stayed[job_id] = word
        if taken:
            self.carry(batch, target, taken)

    def carry(self, batch: str, target: str, entries: dict[str, tuple[str, str]]) -> None:
        """Steps 2 and 3 of a batch held by this call: its rows read from the source and
        written to the target (`@move_put`), then cleared here (`@move_clear`)."""
        rows = read_rows(self.conn, self.source, list(entries), MAX_PAYLOAD, logs=True)
        if target in self.pause_new:
            # a new target is paused before its first job is written (the put makes its meta)
            self.pause_new.discard(target)
            if not self.conn.command("EXISTS", queue_key(target, "meta")):
                admin.pause(self.conn, target)
        words: dict[str, str] = {i: r for i, r in rows.items() if isinstance(r, str)}
        by_state: dict[str, list[str]] = {}
        for job_id, row in rows.items():
            if isinstance(row, Row):
                by_state.setdefault(entries[job_id][0], []).append(job_id)
        for state, ids in by_state.items():
            words.update(self._put(batch, target, state, ids, entries, rows))
        # at least one call, so a batch whose jobs all left the journal is cleared too
        pairs, done = list(words.items()), False
        for start in range(0, max(1, len(pairs)), self.budget):
            chunk = pairs[start : start + self.budget]
            argv = [batch, self.owner, *(p for pair in chunk for p in pair)]
            reply = self.conn.run("move_clear", [base(self.source)], argv, verb="move", queue=self.source)
            if reply[0] == "lost":  # another client holds the batch now: it says what came of the rest
                break
            done = bool(reply[0])
            for (job_id, word), said in zip(chunk, reply[1:], strict=True):
                if said == "deleted":
                    self.ids.append(job_id)
                    self.same += word == "same"
                    self.into[target] += 1
                    self.into_ids.setdefault(target, []).append(job_id)
                elif said != "absent":  # another call ended it, and says so
                    self.stayed[job_id] = word
        if done:
            self.conn.command("UNLINK", arrived_key(target, batch))

    def _put(
        self,
        batch: str,
        target: str,
        state: str,
        ids: list[str],
        entries: dict[str, tuple[str, str]],
        rows: dict[str, Row | str],
    ) -> dict[str, str]:
        """Step 2 for the jobs `ids` of one state: `@move_put` calls of at most `budget`
        jobs and about `BYTE_BUDGET` bytes (one job at least)."""
        sent = [rows[i] for i in ids]
        sizes = [
            decoding.wire_size(i) * ID_WORK + row_bytes(r.fields) + sum(map(decoding.wire_size, r.lines))
            for i, r in zip(ids, sent, strict=True)
            if isinstance(r, Row)
        ]
        words: dict[str, str] = {}
        for start, end in jobs._chunks(sizes, self.budget):
            argv: list[Any] = [state, ARRIVED_MS]
            for job_id in ids[start:end]:
                row = rows[job_id]
                assert isinstance(row, Row)
                pairs = [p for pair in row.fields.items() for p in pair]
                argv += [job_id, entries[job_id][1], len(row.fields), *pairs, len(row.lines), *row.lines]
            got = self.conn.run(
                "move_put", [arrived_key(target, batch), base(target)], argv, verb="move", queue=target
            )
            words.update(zip(ids[start:end], got, strict=True))
        return words


def check_move(source: str, target: str, state: str) -> None:
    """What a move is refused before any I/O: a bad name, the same queue twice, a state
    a move takes no job from (`BadInput`, `InvalidName`)."""
    check_name(source)
    check_name(target, "target queue name")
    if source == target:
        raise BadInput(f"move {source}: the target is another queue, not {source} itself")
    if state not in MOVE_STATES:
        raise BadInput(
            f"move takes jobs from {', '.join(MOVE_STATES)}, not {state!r} "
            "(an active job is in a worker's hands)"
        )


@contract("move", writes=True)
@audit.audited("move", queue="source", bulk=True)
def move_jobs(
    conn: Connection,
    source: str,
    target: str,
    *,
    state: str = "dead",
    error: str | None = None,
    ids: Iterable[str] | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    pause: bool = True,
    take_over: bool = False,
    budget: int = ID_BUDGET,
    progress: Progress | None = None,
) -> MoveResult:
    """Move the jobs of `state` (pending, schedule or dead) in `source` to `target`,
    keeping each one's id, fields, `:logs` and set score: those whose `last_error`
    matches the glob `error`, or the `ids` given (ids as the server holds them), or all;
    at most `limit`. Each job is moved exactly once, across calls cut at any point (the
    module's docstring says how). A job stays when the target holds another job under
    its id (`conflict`) or the move cannot carry it whole (`MoveResult.stayed`).

    The source's journal is finished first (`finish_moves`; `take_over` as there). A
    target with no meta hash yet is paused before the first job is written into it,
    unless `pause=False`. Bounded calls of at most `budget` jobs and about `BYTE_BUDGET`
    bytes; `progress(batches, moved)` after each batch. Recorded in both queues' streams.

    `dry_run=True` writes nothing: `moved` is what would move, `stayed` what would stay.
    Refused before any I/O (`BadInput`, `InvalidName`, `ReadOnly`): the same queue twice,
    a state an active job is in, `ids` with `error`, a limit or budget out of range.

    script: @move_take / @move_put / @move_clear
    precondition: source and target differ; bounded calls of `budget` jobs; the journal's earlier batches
      finished first
    writes: each job: out of its source set into emq:{source}:moving:<batch>, then row, :logs and set written
      in the target, then deleted in the source; publishes `moved_in` on the target
    replies: MoveResult — int, the jobs moved; .ids, .stayed ({id: why}), .busy
    native: none, scripts only
    """
    check_move(source, target, state)
    if ids is not None and error is not None:
        raise BadInput("move takes ids or an error glob, not both")
    if limit is not None:
        whole(limit, "limit")
    checks.move_budget(budget)
    chosen = None if ids is None else moves.job_ids(ids)
    if error is not None:
        triage.glob_spec(error, "the error glob")
    if dry_run:
        return _would_move(conn, source, target, state, error, chosen, limit, budget)
    conn.refuse_writes(f"move {source}")
    mover = _Mover(conn, source, budget, take_over)
    args = {"target": target, "state": state, "error": error, "ids": chosen, "limit": limit, "pause": pause}
    with _recording(conn, mover, args | {"source": source}, also=target):
        mover.finish()
        if pause:
            mover.pause_new.add(target)
        batches = 0
        for page in _move_pages(conn, source, state, error, chosen, limit, budget, mover):
            stayed = {i: "foreign_id" for i in page if moves.is_foreign(i)}
            mover.stayed.update(stayed)
            sent = [i for i in page if i not in stayed]
            if sent:
                mover.take(sent, state, target)
            batches += 1
            if progress:
                progress(batches, len(mover.ids))
    return mover.result()


def _move_pages(
    conn: Connection,
    source: str,
    state: str,
    error: str | None,
    ids: list[str] | None,
    limit: int | None,
    budget: int,
    mover: _Mover | None = None,
) -> Iterator[list[str]]:
    """The ids a move takes, a batch at a time: the ids given, at most `budget` and about
    `BYTE_BUDGET` of them (each counted `ID_WORK` times); or the pages of a search of
    `state`'s set (`triage.find`, which resumes after the last member read, so the
    jobs taken out meanwhile shift nothing). At most `limit` ids in all: with a
    `mover`, `limit` counts the jobs it moved, else the ids offered."""

    def wanted() -> int:
        # a mover's jobs of earlier batches it finished are not this call's
        done = len(mover.ids) - mover.finished if mover is not None else offered
        return budget if limit is None else min(budget, limit - done)

    offered = 0
    if ids is not None:
        at = 0
        while at < len(ids) and wanted() > 0:
            page = decoding.batch(ids, at, wanted(), BYTE_BUDGET, ID_WORK)
            at += len(page)
            offered += len(page)
            yield page
        return
    place: triage.Place | None = None
    while wanted() > 0:
        frame = triage.find(
            conn, source, state=state, error=error, limit=wanted(), budget=DEFAULT_BUDGET, after=place
        )
        if not len(frame):
            return
        offered += len(frame)
        yield list(frame.index)
        place = frame.attrs["next"]
        if place is None:
            return


@contextlib.contextmanager
def _recording(
    conn: Connection, mover: _Mover, args: dict[str, Any], also: str | None = None
) -> Iterator[None]:
    """Around a call's moves: the jobs moved said to the source's record (its recorder
    writes it), and each target's entry written beside it (`also`: a target named
    whatever came of it), whatever the call ended with."""
    failed: BaseException | None = None
    audit.started()
    try:
        yield
    except BaseException as exc:
        failed = exc
        raise
    finally:
        audit.changed(len(mover.ids), mover.ids)
        for queue in sorted(mover.into.keys() | ({also} if also else set())):
            _record_beside(conn, queue, args, failed, mover.into_ids.get(queue, []))


def _record_beside(
    conn: Connection, queue: str, args: dict[str, Any], failed: BaseException | None, ids: list[str]
) -> None:
    """The move's entry in a target's stream: the source's entry says the same (its
    recorder writes it), this one what that target received. A failure to write it is
    an `AuditNotWritten` warning."""
    if conn.read_only:
        return
    fields = {
        "verb": "move",
        "outcome": audit.outcome_of(failed),
        "count": str(len(ids)),
        "ids": audit.ids_field(ids),
        "args": audit.options(conn, args),
        **audit.identity(conn),
    }
    try:
        audit.append(conn, queue, fields, conn.audit_keep)
    except Exception as exc:
        warnings.warn(
            f"audit_failed: move into {queue} not recorded ({str(exc)[:200]})",
            audit.AuditNotWritten,
            stacklevel=3,
        )


@contract("move", writes=True)
@audit.audited("move", queue="source", bulk=True)
def finish_moves(
    conn: Connection, source: str, *, take_over: bool = False, budget: int = ID_BUDGET
) -> MoveResult:
    """Finish the moves out of `source` that earlier calls left part way (a client killed,
    a server restarted): each batch of the journal this call may hold (its own, or one
    whose owner's lease has passed, or any with `take_over=True`) carried to its target
    and cleared here, as `move_jobs` would have. Answers the jobs moved (`finished`
    them all); a batch another client holds is in `.busy`. Recorded in the source's
    stream and each target's. Refused before any I/O: `ReadOnly`, a budget out of range."""
    check_name(source)
    checks.move_budget(budget)
    conn.refuse_writes(f"move {source}")
    mover = _Mover(conn, source, budget, take_over)
    with _recording(conn, mover, {"source": source, "finish": True}):
        mover.finish()
    return mover.result()


def _would_move(
    conn: Connection,
    source: str,
    target: str,
    state: str,
    error: str | None,
    ids: list[str] | None,
    limit: int | None,
    budget: int,
) -> MoveResult:
    """What `move_jobs` would do on the queues as they are, from reads only: each job
    found (an id given: when in `state`'s set) compared with the target's row of its id."""
    would: list[str] = []
    same = 0
    stayed: dict[str, str] = {}
    for page in _move_pages(conn, source, state, error, ids, limit, budget):
        sent = [i for i in page if not moves.is_foreign(i)]
        stayed.update({i: "foreign_id" for i in page if i not in sent})
        if ids is not None:
            members = _members_of(conn, source, state, sent)
            stayed.update({i: f"not_{state}" for i in sent if i not in members})
            sent = [i for i in sent if i in members]
        here = read_rows(conn, source, sent, MAX_PAYLOAD, logs=True)
        there = read_rows(conn, target, sent, MAX_WHOLE_FIELD)
        for job_id in sent:
            row, theirs = here[job_id], there[job_id]
            if isinstance(row, str):
                stayed[job_id] = row
            elif theirs == "gone" or (isinstance(theirs, Row) and theirs.fields == row.fields):
                would.append(job_id)
                same += isinstance(theirs, Row)
            else:
                stayed[job_id] = "conflict"
    return MoveResult(would, same, 0, stayed, dry_run=True)


def _members_of(conn: Connection, q: str, state: str, ids: list[str]) -> set[str]:
    """Those of `ids` in `state`'s set, or for pending in their lane. Reads only."""
    pipe = conn.pipeline()
    for job_id in ids:
        pipe.zscore(queue_key(q, state), decoding.wire(job_id))
    found = {i for i, s in zip(ids, pipe.execute(), strict=True) if s is not None}
    if state != "pending":
        return found
    rest = [i for i in ids if i not in found]
    for job_id in rest:
        pipe.hget(decoding.wire(job_key(q, job_id, gate=False)), "group")
    groups = pipe.execute(raise_on_error=False)
    asked = [(i, g) for i, g in zip(rest, groups, strict=True) if isinstance(g, str)]
    for job_id, g in asked:
        pipe.zscore(decoding.wire(lane_key(q, g, gate=False)), decoding.wire(job_id))
    found |= {i for (i, _), s in zip(asked, pipe.execute(), strict=True) if s is not None}
    return found
