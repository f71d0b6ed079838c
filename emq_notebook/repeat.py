"""The repeat registry: jobs produced on a cadence.

`emq:{q}:repeat` (zset: name -> next due, ms) and `emq:{q}:repeat:defs` (hash:
name -> definition). A drain leaves both alone; an obliterate deletes them.
"""

from __future__ import annotations

import json
import math
import re

from .catalogue import contract
from .checks import MAX_MS, MAX_WHOLE, whole
from .checks import payload as checked_payload
from .connector import Connection
from .decoding import wire_size
from .defaults import BYTE_BUDGET
from .errors import BadInput
from .keyspace import base, check_name, new_id, queue_key

# repeatables one `@read_repeats` call reads at most: each is a name read by chunks, an
# HSTRLEN and an HGET of its definition, about 4.5 us on the server (100,000 of them on
# the shared machine: a call of 1,000 held Valkey 4.4 ms at the median, 9.5 at worst,
# where the whole registry's ZRANGE held it 56 ms and its HGETALL 30)
REPEATS_A_CALL = 1000
# the longest definition any call reads or writes (lua/includes/repeat_def.lua holds the
# same number): a longer one, another node's, is answered by its size in a listing,
# skipped by a tick and refused by run-now, its bytes left on the server
DEF_BYTES = BYTE_BUDGET
# a whole number as the scripts read one (lua/includes/reads.lua `whole_of`)
_WHOLE = re.compile(r"0|-?[1-9][0-9]{0,16}")


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
    `max_attempts` a whole number from 1, `payload` a string of at most `DEF_BYTES`
    bytes (1 MiB, not `defaults.MAX_PAYLOAD`: a tick reads each due definition inside
    one call, and one over `DEF_BYTES` it never reads). The script refuses a definition
    whose JSON (the payload escaped, with the rest) is over `DEF_BYTES` too, writing
    nothing.
    """
    check_name(name, "repeatable name")
    if group is not None:
        check_name(group, "group")
    whole(every_ms, "every_ms", most=MAX_MS)
    whole(max_attempts, "max_attempts")
    if isinstance(payload, str) and wire_size(payload) > DEF_BYTES:
        raise BadInput(f"a repeatable's payload is at most {DEF_BYTES:,} bytes, not {wire_size(payload):,}")
    return conn.run(
        "repeat_add",
        [base(q)],
        [name, every_ms, checked_payload(payload), group or "", max_attempts],
        verb="repeat",
        queue=q,
    )


def unregister(conn: Connection, q: str, name: str) -> bool:
    """Remove repeatable `name`; answers whether it was registered."""
    check_name(name, "repeatable name")
    return conn.run("repeat_remove", [base(q)], [name], verb="unrepeat", queue=q) == 1


def registered(conn: Connection, q: str, limit: int | None = None) -> list[dict]:
    """Every repeatable (the first `limit` due, when named) in due order: its `name`,
    `every_ms`, `payload`, `group`, `next_due_ms` (None for a score of +inf) and
    `problem`, None for a definition that reads as `tick` reads it. Otherwise the row
    says why, its `every_ms`, `payload` and `group` None: `too long (N bytes)` (over
    `DEF_BYTES`: its bytes stay on the server, a plain HGET reads them), `no
    definition`, `not JSON`, `not a JSON object`, or `bad <field>` (every, payload,
    group or max_attempts, as lua/includes/repeat_def.lua reads them: `tick` skips such
    a definition and `run_now` refuses it). A listing never fails on what another node
    wrote in the registry.

    Read a page at a time (`@read_repeats`: at most `REPEATS_A_CALL` repeatables and
    about `BYTE_BUDGET` bytes a call), so no call holds the server long however big the
    registry. Each page starts after the last name of the one before, wherever it is
    then; a repeatable a tick moves while the pages are read is listed once, or missed
    when it moves ahead of the place. Reads only."""
    if limit is not None:
        whole(limit, "limit", least=0)
    key, out, seen, at = queue_key(q, "repeat"), list[dict](), set[str](), 0
    while limit is None or len(out) < limit:
        want = REPEATS_A_CALL if limit is None else min(REPEATS_A_CALL, limit - len(out))
        reply = conn.run(
            "read_repeats", [base(q)], [at, want, BYTE_BUDGET, DEF_BYTES], verb="repeats", queue=q
        )
        names = reply[0::3]
        for name, due, raw in zip(names, reply[1::3], reply[2::3], strict=True):
            if name not in seen:
                seen.add(name)
                out.append(_row(name, due, raw))
        # fewer than asked: the registry ended, or their bytes reached the budget
        if not names or (len(names) < want and _bytes(names, reply[2::3]) < BYTE_BUDGET):
            break
        rank = conn.command("ZRANK", key, names[-1])
        at = at + len(names) if rank is None else int(rank) + 1
    return out


def next_due(conn: Connection, q: str, name: str) -> int | None:
    """Repeatable `name`'s next due time (ms); None when it is not registered or its due
    time is +inf. One ZSCORE; any name, as `registered` read it from another node."""
    at = conn.command("ZSCORE", queue_key(q, "repeat"), name)
    return None if at is None or not math.isfinite(float(at)) else int(float(at))


def _bytes(names: list[str], defs: list[object]) -> int:
    """The bytes `@read_repeats` counted for a page: its names and the definitions it read."""
    return sum(map(wire_size, names)) + sum(wire_size(d) for d in defs if isinstance(d, str))


def _row(name: str, due: str, raw: object) -> dict:
    """One repeatable as `registered` answers it, from what `@read_repeats` sent."""
    d, problem = _definition(raw)
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


def _definition(raw: object) -> tuple[dict | None, str | None]:
    """The definition, or None and what keeps `tick` from running it."""
    if raw is None:
        return None, "no definition"
    if isinstance(raw, int):
        return None, f"too long ({raw:,} bytes)"
    try:
        d = json.loads(str(raw))
    except (ValueError, RecursionError):
        return None, "not JSON"
    if not isinstance(d, dict):
        return None, "not a JSON object"
    bad = _bad_field(d)
    return (None, f"bad {bad}") if bad else (d, None)


def _bad_field(d: dict) -> str | None:
    """The first field `tick` cannot read (lua/includes/repeat_def.lua `readable`), or None."""
    every = d.get("every")
    if not isinstance(every, (int, float)) or isinstance(every, bool):
        return "every"
    if not 1 <= every <= MAX_WHOLE or every != int(every):
        return "every"
    if not isinstance(d.get("payload"), str):
        return "payload"
    if "group" in d and not isinstance(d["group"], str):
        return "group"
    attempts = d.get("max_attempts", "1")
    if isinstance(attempts, (int, float)) and not isinstance(attempts, bool) and math.isfinite(attempts):
        attempts = f"{attempts:.0f}"
    if not isinstance(attempts, str) or not _WHOLE.fullmatch(attempts) or not 1 <= int(attempts) <= MAX_WHOLE:
        return "max_attempts"
    return None


def tick(conn: Connection, q: str, max_jobs: int = 100) -> list[str]:
    """Every due repeatable produces one job (at most `max_jobs`, 1 to 10,000); answers
    the new ids. A definition that cannot be read is skipped, left as it is, and
    announced as a `bad_row` event."""
    whole(max_jobs, "max_jobs", most=10_000)
    ids = [new_id() for _ in range(max_jobs)]
    return list(conn.run("repeat_tick", [base(q)], ids, verb="tick", queue=q))


@contract(
    "run-now",
    writes=True,
    script="@repeat_run_now",
    precondition="the repeatable exists and its definition reads",
    changes="a new job (row, pending or its lane); the next due time unchanged; publishes `added`",
    replies="str — the new job's id / Gone / BadRow",
    native="none, a script only",
)
def run_now(conn: Connection, q: str, name: str) -> str:
    """One job from repeatable `name`, now (its payload, group and attempts); answers the
    new job's id. The next due time is left as it was: the cadence is kept.
    Refuses `Gone` when no repeatable has that name, and `BadRow` when its definition
    cannot be read; a refusal writes nothing."""
    check_name(name, "repeatable name")
    return str(conn.run("repeat_run_now", [base(q)], [name, new_id()], verb="run-now", queue=q, job=name))
