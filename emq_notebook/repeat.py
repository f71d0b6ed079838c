"""The repeat registry: jobs produced on a cadence.

`emq:{q}:repeat` (zset: name -> next due, ms) and `emq:{q}:repeat:defs` (hash:
name -> definition). A drain leaves both alone; an obliterate deletes them.
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Iterable

import pandas as pd

from . import audit
from .catalogue import contract
from .checks import MAX_MS, whole
from .checks import payload as checked_payload
from .connector import Connection
from .decoding import text_dtype, wire_size
from .defaults import BYTE_BUDGET
from .errors import BadInput, EMQError
from .keyspace import base, check_name, new_id, queue_key

# repeatables one `@read_repeats` call reads at most (bench/README.md: Python's bounds)
REPEATS_A_CALL = 1000
# the longest definition any call reads or writes (lua/includes/repeat_def.lua holds the
# same number): a longer one, another node's, is answered by its size in a listing,
# skipped by a tick and refused by run-now, its bytes left on the server
DEF_BYTES = BYTE_BUDGET
# the due names one tick call examines at most (lua/repeat_tick.lua holds the
# same number), whatever becomes of them: made, skipped as bad or taken out as nameless
TICK_NAMES = 500
# the `bad_row` events one tick call emits at most (lua/includes/repeat_reported.lua holds
# the same number): each bad definition is reported once while it stays as it is, the ones
# past this many in the calls after
TICK_REPORTS = 20
# where each queue's next tick starts its walk, by connection: the rank the last call
# answered (`@repeat_tick`'s place; a hint: one past the due names starts at the head).
# Kept here, so every caller of `tick` (a Worker, a notebook) walks on without holding it
_PLACES: weakref.WeakKeyDictionary[Connection, dict[str, int]] = weakref.WeakKeyDictionary()
# the jobs one tick call makes at most, each a row, a placement and an event
MAX_TICK_JOBS = 250
# the due times (ms) a pandas Timestamp holds (ns since 1970: the years 1677 to 2262);
# a score another node wrote may lie far past them (1e16, -1e300)
SHOWN_MS = (pd.Timestamp.min.value // 1_000_000 + 1, pd.Timestamp.max.value // 1_000_000)


def _no_job(result: object, job: str | None) -> tuple[int, list[str]]:
    """What a change of the registry touched: no job (`audit.audited`'s `counts`)."""
    return 0, []


@audit.audited("repeat", single=True, counts=_no_job)
def register(
    conn: Connection,
    q: str,
    name: str,
    every_ms: int,
    payload: str,
    group: str | None = None,
    max_attempts: int = 1,
) -> int:
    """Register (or replace) repeatable `name`; answers its first due time (ms).

    Checked before any I/O (`BadInput`): `every_ms` from 1 ms to a year,
    `max_attempts` a whole number from 1, `payload` a string, and the definition the
    server stores (`_definition_text`: the payload written as JSON, with the rest) at most
    `DEF_BYTES` bytes (1 MiB, not `defaults.MAX_PAYLOAD`: a tick reads each due
    definition inside one call, and one over `DEF_BYTES` it never reads). The script
    checks the same bound on what it is sent, refusing `TooLong` (a `BadInput`), and
    reads the definition as a tick does; a refusal writes nothing. Recorded from every
    surface (verb `repeat`, its options as `args`), in the script's own call.
    """
    check_name(name, "repeatable name")
    if group is not None:
        check_name(group, "group")
    whole(every_ms, "every_ms", most=MAX_MS)
    whole(max_attempts, "max_attempts")
    payload = checked_payload(payload)  # a payload's own bound first (MAX_PAYLOAD), as every verb's
    text = _definition_text(every_ms, payload, group, max_attempts)
    size = wire_size(text)
    if size > DEF_BYTES:
        raise BadInput(
            f"repeatable {name!r}: a definition is at most {DEF_BYTES:,} bytes (repeat.DEF_BYTES), "
            f"not {size:,} (its payload written as JSON, with the rest): no tick would read it"
        )
    return conn.run("repeat_add", [base(q)], [name, text], verb="repeat", queue=q, job=name)


def _definition_text(every_ms: int, payload: str, group: str | None = None, max_attempts: int = 1) -> str:
    """A repeatable's definition as `register` stores it (`emq:{q}:repeat:defs`): JSON
    text, each character past ASCII as it is (so its bytes on the wire, `wire_size`, are
    the bytes the server holds), max_attempts as text, as the script wrote it before."""
    fields = {"every": every_ms, "payload": payload, "group": group or "", "max_attempts": str(max_attempts)}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


@audit.audited("unrepeat", single=True, counts=_no_job)
def unregister(conn: Connection, q: str, name: str) -> bool:
    """Remove repeatable `name`; answers whether it was registered. Recorded from every
    surface (verb `unrepeat`), in the script's own call."""
    check_name(name, "repeatable name")
    return conn.run("repeat_remove", [base(q)], [name], verb="unrepeat", queue=q) == 1


def registered(conn: Connection, q: str, limit: int | None = None) -> list[dict]:
    """Every repeatable (the first `limit` due, when named) in due order: its `name`,
    `every_ms`, `payload`, `group`, `next_due_ms` (None for a score of +inf) and
    `problem`: None for a definition `tick` reads, else the server's word for why
    (`too long (N bytes)`, `no definition`, `not JSON`, `not a JSON object`, `bad
    <field>`; lua/includes/repeat_def.lua), its `every_ms`, `payload` and `group` None.
    A listing never fails on what another node wrote in the registry.

    Read a page at a time (`@read_repeats`: at most `REPEATS_A_CALL` repeatables and
    about `BYTE_BUDGET` bytes a call), each page after the last name of the one before;
    a repeatable a tick moves meanwhile is listed once, or missed. Reads only."""
    if limit is not None:
        whole(limit, "limit", least=0)
    key, out, seen, at = queue_key(q, "repeat"), list[dict](), set[str](), 0
    while limit is None or len(out) < limit:
        want = REPEATS_A_CALL if limit is None else min(REPEATS_A_CALL, limit - len(out))
        reply = conn.run(
            "read_repeats", [base(q)], [at, want, BYTE_BUDGET, DEF_BYTES], verb="repeats", queue=q
        )
        *page, spent = reply
        names = page[0::4]
        for name, due, raw, bad in zip(names, page[1::4], page[2::4], page[3::4], strict=True):
            if name not in seen:
                seen.add(name)
                out.append(_row(name, due, raw, bad))
        # fewer than asked: the registry ended, or their bytes reached the budget
        if not names or (len(names) < want and int(spent) < BYTE_BUDGET):
            break
        rank = conn.command("ZRANK", key, names[-1])
        at = at + len(names) if rank is None else int(rank) + 1
    return out


def next_due(conn: Connection, q: str, name: str) -> int | None:
    """Repeatable `name`'s next due time (ms); None when it is not registered or its due
    time is +inf, or the registry key holds another type (written by hand). One ZSCORE;
    any name, as `registered` read it from another node."""
    try:
        at = conn.command("ZSCORE", queue_key(q, "repeat"), name)
    except EMQError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        return None
    return None if at is None or not math.isfinite(float(at)) else int(float(at))


def due_times(times: Iterable[int | None]) -> pd.DatetimeIndex:
    """Due times (ms) as UTC timestamps to show; NaT for none, and for one no Timestamp
    holds (`SHOWN_MS`: a score another node wrote), so a listing shows it blank."""
    lo, hi = SHOWN_MS
    return pd.to_datetime(
        pd.array([t if t is not None and lo <= t <= hi else None for t in times], dtype="Int64"),
        unit="ms",
        utc=True,
    )


def periods(every: Iterable[int | None]) -> pd.TimedeltaIndex:
    """Cadences (ms) as timedeltas to show; NaT for none, and for one past what a
    Timedelta holds (about 292 years: a definition another node wrote)."""
    most = pd.Timedelta.max.value // 1_000_000
    return pd.to_timedelta(
        pd.array([e if e is not None and e <= most else None for e in every], dtype="Int64"), unit="ms"
    )


def text(values: list[str | None]) -> pd.Series:
    """A text column of a listing: pandas' default text, or `object` when a value holds a
    byte that is not UTF-8 (a name or payload another node wrote, which Arrow refuses);
    shown through `decoding.visible`, the value kept as read."""
    return pd.Series(values, dtype=text_dtype(values))


def _row(name: str, due: str, raw: object, bad: str | None) -> dict:
    """One repeatable as `registered` answers it, from what `@read_repeats` sent."""
    d, problem = _definition(raw, bad)
    at = float(due)
    return {
        "name": name,
        "every_ms": None if d is None else int(d["every"]),
        "payload": None if d is None else d["payload"],
        "group": None if d is None else d.get("group") or None,
        # a score another node wrote may be +inf: no time
        "next_due_ms": int(at) if math.isfinite(at) else None,
        "problem": problem,
    }


def _definition(raw: object, bad: str | None) -> tuple[dict | None, str | None]:
    """The definition, or None and what keeps `tick` from running it. Whether a tick can
    is the server's word, `bad` (the field lua/includes/repeat_def.lua `readable` found
    wrong, the one rule); here it is only said: `not JSON` for a text that does not
    parse (here, or as the server parses it), `not a JSON object`, or `bad <field>`."""
    if raw is None:
        return None, "no definition"
    if isinstance(raw, int):
        return None, f"too long ({raw:,} bytes)"
    try:
        d = json.loads(str(raw))
    except (ValueError, RecursionError):
        d = None
    if bad or not isinstance(d, dict):
        if d is not None and not isinstance(d, dict):
            return None, "not a JSON object"
        return None, "not JSON" if d is None or bad in (None, "definition") else f"bad {bad}"
    return d, None


def tick(conn: Connection, q: str, max_jobs: int = 100) -> list[str]:
    """Every due repeatable produces one job (at most `max_jobs`, 1 to `MAX_TICK_JOBS`,
    all in one script); answers the new ids, one a repeatable at most. A call examines at most
    `TICK_NAMES` due names and about `DEF_BYTES` bytes of names and definitions; the
    rest wait for the next tick, which walks on from where this one stopped (`_PLACES`)
    and, at the due names' end, from the head again: bad definitions due first hold the
    rest back a call per `TICK_NAMES` of them, not until they are fixed.

    A definition that cannot be read is skipped, left as it is, and announced as a
    `bad_row` event once while it stays as it is, at most `TICK_REPORTS` a call (the
    server keeps what it reported at `emq:{q}:repeat:reported`); `registered` says why
    each is bad. A registry key holding another type than its own (a string at
    `emq:{q}:repeat`, written by hand) makes no job and answers []: a worker's pass
    goes on."""
    whole(max_jobs, "max_jobs", most=MAX_TICK_JOBS)
    ids = [new_id() for _ in range(max_jobs)]
    places = _PLACES.setdefault(conn, {})
    place, *made = conn.run("repeat_tick", [base(q)], [places.get(q, 0), *ids], verb="tick", queue=q)
    places[q] = int(place)
    return made


@contract("run-now", writes=True)
@audit.audited("run-now")
def run_now(conn: Connection, q: str, name: str) -> str:
    """One job from repeatable `name`, now (its payload, group and attempts); answers the
    new job's id. The next due time is left as it was: the cadence is kept.
    Refuses `Gone` when no repeatable has that name, and `BadRow` when its definition
    cannot be read; a refusal writes nothing.

    script: @repeat_run_now
    precondition: the repeatable exists and its definition reads
    writes: a new job (row, pending or its lane); the next due time unchanged; publishes `added`
    replies: str — the new job's id / Gone / BadRow
    native: none, a script only
    """
    check_name(name, "repeatable name")
    return str(conn.run("repeat_run_now", [base(q)], [name, new_id()], verb="run-now", queue=q, job=name))
