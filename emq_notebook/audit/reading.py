"""Reading the audit trail: the queues with a stream (`streams`), and their entries
newest first, a page at a time within the bytes a call may copy (`read`)."""

from __future__ import annotations

import heapq
import itertools
import json
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..checks import whole
from ..decoding import one_line, whole_text, wire_size
from ..defaults import BYTE_BUDGET
from ..errors import EMQError, InvalidName
from ..keyspace import AUDIT_MATCH, audit_key, base, check_name, queue_from_audit_key
from .entry import STARTED, _one_line

if TYPE_CHECKING:
    from ..connector import Connection

COLUMNS = (
    "time",
    "queue",
    "verb",
    "outcome",
    "count",
    "who",
    "env",
    "conn",
    "surface",
    "reason",
    "args",
    "ids",
    "notebook",
    "acl_user",
    "ids_digest",
    "entry",
)
# keys one SCAN call examines when finding the streams
SCAN_COUNT = 10_000
# entries one read answers at most (`read`'s limit)
MAX_READ = 100_000
# entries the first page of a stream asks for: an entry this module writes is about
# 30 KB at most, so about `defaults.BYTE_BUDGET`; each next page of the stream asks for
# as many entries as BYTE_BUDGET holds at the size of the page before, at most PAGE_MOST
# (one XREVRANGE of 100,000 entries of 30 KB would copy 3 GB out of the server at once).
# A page is read on the server an entry at a time within BYTE_BUDGET (`@read_audit`)
FIRST_PAGE = 32
PAGE_MOST = 500


# the queues each server's audit streams were written to by this process (by redacted label)
_written: dict[str, set[str]] = {}
_written_lock = threading.Lock()


# -- reading it -------------------------------------------------------------------------------------


def streams(conn: Connection) -> list[str]:
    """The queues with an audit stream now: found by `SCAN MATCH emq:audit:{*} TYPE
    stream` over every primary, on each call (one walk of the keyspace, `SCAN_COUNT`
    keys a call; a key under a name `check_name` refuses, another node's, passed over:
    `_named`), so a stream another client made a moment ago is among them. Asked only
    when an operator asks for every queue's entries (`read` with no queue: a call, a
    command, a click), never by a watching view's refresh (SPEC 11). The queue directory
    cannot answer it: an obliterated queue keeps its stream and has no meta hash."""
    with conn.wire():
        keys = conn.client.scan_iter(match=AUDIT_MATCH, count=SCAN_COUNT, _type="stream")
        return sorted({q for q in map(queue_from_audit_key, keys) if q and _named(q)})


def _named(q: str) -> bool:
    """True for a queue name the toolkit names (`check_name`): another node's stream under
    a name it refuses (`emq:audit:{a b}`, bytes not UTF-8, 1 MB long) is no queue's, no
    verb addresses it, and a read of every queue passes it over rather than fail."""
    try:
        check_name(q)
    except InvalidName:
        return False
    return True


def written(conn: Connection, *also: str) -> list[str]:
    """The queues this process wrote audit entries to on `conn`'s server, and `also`."""
    with _written_lock:
        return sorted(set(_written.get(conn.label, ())) | set(also))


def entry_order(entry: str) -> tuple[int, int]:
    """A stream entry id as a sortable pair (milliseconds, sequence)."""
    return _entry_order(entry)


def _server_ms(conn: Connection) -> int:
    seconds, micros = conn.command("TIME")
    return int(seconds) * 1000 + int(micros) // 1000


def _entry_order(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


def _parsed(text: str, empty: Any) -> Any:
    """A JSON field as shown: each text in it on one line (`one_line`), as in every other
    column (a newline as `\\n`, a byte that is not UTF-8 as `\\xNN`)."""
    if not text:
        return empty
    try:
        return _shown(json.loads(text))
    except ValueError:  # an entry another client wrote by hand: shown as it is
        return one_line(text)


def _shown(value: Any) -> Any:
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {one_line(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


# the text columns of a row, each a field of the entry shown on one line
_TEXTS = ("verb", "outcome", "who", "env", "conn", "surface", "reason", "notebook", "acl_user")


def _row(queue: str, entry: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """An entry as a row of the frame: every value on one line (`one_line`), so no text
    an operator typed or another client wrote can break a table or a listing into a
    row that was never written."""
    ids = _parsed(fields.get("ids", ""), {})
    first = ids.get("first", []) if isinstance(ids, dict) else [ids]
    texts = {name: one_line(fields.get(name, "")) for name in _TEXTS}
    return {
        "time": pd.Timestamp(_entry_order(entry)[0], unit="ms", tz="UTC"),
        "queue": one_line(queue),
        **texts,
        "count": whole_text(fields.get("count", "")),
        "args": _parsed(fields.get("args", ""), {}),
        "ids": [one_line(i) for i in first],
        "ids_digest": one_line(ids.get("digest", "")) if isinstance(ids, dict) else "",
        "entry": one_line(entry),
    }


def read(
    conn: Connection, queue: str | None = None, *, since_ms: int | None = None, limit: int = 1000
) -> pd.DataFrame:
    """The audit entries, newest first: one queue's, or (None) every queue's with a
    stream (`streams`), at most `limit` in all, and only the last `since_ms`
    milliseconds (by the server's clock) when given. Columns: `time` (UTC, the entry's
    server time), `queue`, `verb`, `outcome`, `count` (NA when not known), `who`, `env`,
    `conn`, `surface`, `reason`, `args` (a dict), `ids` (the first ids, a list), then
    `notebook`, `acl_user`, `ids_digest` and `entry` (the stream id). Text is shown
    with any non-UTF-8 byte as `\\xNN`.

    Each stream is read a page at a time, newest first (`_pages`: about
    `defaults.BYTE_BUDGET` bytes a call), the first pages in one pipeline, a next page
    only while the newest `limit` entries may still be in it. Reads only. Refused before
    any I/O: a `limit` outside 1 to `MAX_READ` (`BadInput`), a bad queue name."""
    whole(limit, "limit", most=MAX_READ)
    if since_ms is not None:
        whole(since_ms, "since_ms", least=0)
    queues = [check_name(queue)] if queue is not None else streams(conn)
    low = "-" if since_ms is None else str(max(0, _server_ms(conn) - since_ms))
    first = min(FIRST_PAGE, limit)
    firsts: list[list] = []
    if queues:
        # the first pages in one pipeline (`@read_audit` reads only: any session)
        pipe = conn.pipeline()
        for q in queues:
            _page(conn, q, "+", low, first, pipe)
        firsts = [
            _page_of(q, page) for q, page in zip(queues, pipe.execute(raise_on_error=False), strict=True)
        ]
    each = [_pages(conn, q, low, limit, page) for q, page in zip(queues, firsts, strict=True)]
    newest = heapq.merge(*each, key=lambda got: _entry_order(got[1]), reverse=True)
    rows = [_row(q, entry, fields) for q, entry, fields in itertools.islice(newest, limit)]
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    frame["count"] = frame["count"].astype("Int64")
    return frame


def _pages(conn: Connection, q: str, low: str, limit: int, page: list) -> Iterator[tuple[str, str, Any]]:
    """Queue `q`'s entries newest first, each as (q, its id, its fields), down to `low`,
    `limit` at most, from its first `page` on, but a bulk run's `started` entry whose
    closing entry is read (that one says the run whole; a start with none shows: the run
    goes on, or was cut): each next page one `@read_audit` call
    from below the last entry read, of as many entries as `defaults.BYTE_BUDGET` bytes
    hold at the size of the page before (`PAGE_MOST` at most), the server stopping once
    they reach BYTE_BUDGET bytes, read only when the entries before are used up."""
    asked, left = min(FIRST_PAGE, limit), limit
    closed: set[str] = set()  # the `started` entries of the closing entries read
    while True:
        for entry, fields in page:
            if entry in closed:  # a run's start, its closing entry read before it
                closed.discard(entry)
                continue
            if fields.get(STARTED):
                closed.add(fields[STARTED])
            left -= 1
            yield q, entry, fields
        size = sum(_entry_size(entry, fields) for entry, fields in page)
        # a page ends short where the range does, or where its bytes reached the budget
        if not page or left <= 0 or (len(page) < asked and size < BYTE_BUDGET):
            return
        asked = min(left, PAGE_MOST, max(1, BYTE_BUDGET * len(page) // max(size, 1)))
        try:
            page = _page_of(q, _page(conn, q, f"({page[-1][0]}", low, asked))
        except EMQError as exc:
            page = _page_of(q, exc)


def _page(conn: Connection, q: str, high: str, low: str, most: int, pipe: Any = None) -> Any:
    """One `@read_audit` call: at most `most` of queue `q`'s entries from `high` down to
    `low`, newest first, read on the server an entry at a time until they reach
    `defaults.BYTE_BUDGET` bytes (one XREVRANGE of a count copies that count of
    entries, whatever each holds). Queued on `pipe` when given."""
    return conn.run(
        "read_audit", [audit_key(q), base(q)], [high, low, most, BYTE_BUDGET], verb="audit", pipeline=pipe
    )


def _page_of(q: str, reply: Any) -> list:
    """A `@read_audit` reply as a page of (id, {name: value}); an error reply (the key
    holds another type than a stream, written by another client) is `EMQError`, naming
    the key."""
    if isinstance(reply, BaseException):
        text = _one_line(reply)
        raise EMQError(f"{audit_key(q)} is not read: {text.split(': ', 1)[-1]}")
    return [(entry, dict(zip(flat[::2], flat[1::2], strict=False))) for entry, flat in reply]


def _entry_size(entry: str, fields: Mapping[str, str]) -> int:
    """The bytes an entry read took on the wire: its id, names and values."""
    return len(entry) + sum(wire_size(name) + wire_size(value) for name, value in fields.items())
