"""The repeat registry: jobs produced on a cadence.

`emq:{q}:repeat` (zset: name -> next due, ms) and `emq:{q}:repeat:defs` (hash:
name -> definition). A drain leaves both alone; an obliterate deletes them.
"""

from __future__ import annotations

import json

from .catalogue import contract
from .checks import MAX_MS, whole
from .checks import payload as checked_payload
from .connector import Connection
from .keyspace import base, check_name, new_id, queue_key


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
    `max_attempts` a whole number from 1, `payload` a string of at most
    `defaults.MAX_PAYLOAD` bytes.
    """
    check_name(name, "repeatable name")
    if group is not None:
        check_name(group, "group")
    whole(every_ms, "every_ms", most=MAX_MS)
    whole(max_attempts, "max_attempts")
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


def registered(conn: Connection, q: str) -> list[dict]:
    """Every repeatable with its definition and next due time (ms)."""
    due = conn.command("ZRANGE", queue_key(q, "repeat"), 0, -1, "WITHSCORES")
    defs = conn.command("HGETALL", queue_key(q, "repeat:defs")) or {}
    out = []
    for name, at in due:
        d = json.loads(defs.get(name, "{}"))
        out.append(
            {
                "name": name,
                "every_ms": d.get("every"),
                "payload": d.get("payload"),
                "group": d.get("group") or None,
                "next_due_ms": int(float(at)),
            }
        )
    return out


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
