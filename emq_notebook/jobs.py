"""Job scope: the queue underneath (enqueue, claim, complete, fail) and the
per-job operator verbs that reach into one row.

Each per-job verb is ONE script that declares its keys; a missing row refuses
`Gone` and writes nothing; every check runs before the first write.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from . import audit, decoding, transitions
from .catalogue import contract
from .checks import MAX_MS, move_budget, whole
from .checks import payload as _payload
from .connector import Connection, Pipeline
from .defaults import BYTE_BUDGET, MAX_WHOLE_FIELD, MOVE_BUDGET
from .errors import BadInput, BadRow, Gone, WireError
from .keyspace import base, check_name, check_text, job_key, logs_key, new_id, queue_key
from .transitions import MORE, Claimed


def check_lease(lease_ms: object) -> int:
    """A lease is a whole number of ms from 1 to `checks.MAX_MS` (what SET PX takes)."""
    return whole(lease_ms, "lease_ms", least=1, most=MAX_MS)


@contract("enqueue", writes=True)
@audit.audited("enqueue")
def enqueue(
    conn: Connection,
    q: str,
    payload: str,
    *,
    id: str | None = None,
    group: str | None = None,
    delay_ms: int = 0,
    priority: int = 0,
    max_attempts: int = 3,
    dedup: str | None = None,
    backoff_ms: int = 1000,
    pipeline: Pipeline | None = None,
) -> str:
    """Add a job; answers its id.

    Every number is checked before any I/O (`BadInput`): `delay_ms` and
    `backoff_ms` from 0 to a year of ms, `priority` from 0 and `max_attempts`
    from 1, both at most 2**53 - 1 (what a Lua double holds exactly); the payload a
    string of at most `defaults.MAX_PAYLOAD` bytes (one script writing more would hold
    the server over 20 ms).

    A held `dedup` key answers the id of the job holding it, and an `id` that
    already has a row answers that id: nothing is written in either case.
    With `pipeline` (`conn.pipeline()`), the call is queued there, and the id comes
    from `pipeline.execute()`, in its place (this call answers None).
    """
    job_id = check_name(id, "job id") if id is not None else new_id()
    job_key(q, job_id)
    if group is not None:
        check_name(group, "group")
    if dedup is not None:
        check_text(dedup, "dedup key")
    argv = [
        job_id,
        _payload(payload),
        group or "",
        whole(delay_ms, "delay_ms", least=0, most=MAX_MS),
        whole(priority, "priority", least=0),
        whole(max_attempts, "max_attempts"),
        dedup or "",
        whole(backoff_ms, "backoff_ms", least=0, most=MAX_MS),
    ]
    return conn.run("enqueue", [base(q)], argv, verb="enqueue", queue=q, pipeline=pipeline)


# jobs an `enqueue_many` call adds at most: an enqueue writes a row, a drain only deletes
# one, so half a drain's budget (bench/README.md: Python's bounds)
CHUNK = 250


def enqueue_many(
    conn: Connection,
    q: str,
    payloads: Sequence[str],
    *,
    group: str | None = None,
    delay: int | None = None,
    dedup: Sequence[str | None] | None = None,
    chunk: int = CHUNK,
    priority: int = 0,
    max_attempts: int = 3,
    backoff_ms: int = 1000,
) -> list[str]:
    """Add many jobs in bounded calls (one `@enqueue_many` script per `chunk`);
    answers one id per payload, in order.

    Each job is added as `enqueue` would add it, with a generated id: the same
    row, the same set (`delay` ms > 0: schedule; `group`: that lane; else
    pending), the same `added` event. `dedup` is None or one key (or None) per
    payload; a held key answers the id holding it and writes nothing for that
    payload, as `enqueue` does.

    A call takes at most `chunk` jobs and about `defaults.BYTE_BUDGET` bytes of
    ids, payloads and dedup keys (a payload larger than that goes alone), so a
    batch of large payloads never becomes one long script.

    Refuses before any I/O, so nothing at all is written: `BadInput` for a
    payload that is not a string or is over `defaults.MAX_PAYLOAD` bytes, a `dedup`
    that is not one entry per payload, the numbers `enqueue` refuses and a `chunk`
    outside 1 to `defaults.MAX_MOVE_BUDGET`;
    `InvalidName` for a bad group name or dedup key. Each call is atomic and checks
    its arguments before its first write; an interrupt between calls leaves the
    chunks already sent.
    """
    check_name(q)
    if isinstance(payloads, (str, bytes)):
        raise BadInput("payloads is a sequence of strings (JSON text), not one string")
    texts = [_payload(p) for p in payloads]
    if group is not None:
        check_name(group, "group")
    if isinstance(dedup, (str, bytes)):
        raise BadInput("dedup is one key (or None) per payload, not one string")
    keys = (
        [""] * len(texts)
        if dedup is None
        else ["" if k is None else check_text(k, "dedup key") for k in dedup]
    )
    if len(keys) != len(texts):
        raise BadInput(f"dedup holds {len(keys):,} keys for {len(texts):,} payloads: one per payload")
    shared = [
        group or "",
        whole(0 if delay is None else delay, "delay", least=0, most=MAX_MS),
        whole(priority, "priority", least=0),
        whole(max_attempts, "max_attempts"),
        whole(backoff_ms, "backoff_ms", least=0, most=MAX_MS),
    ]
    move_budget(chunk, "chunk")
    # each job's bytes on the wire, all measured before the first call (a text no
    # server can hold is BadInput here, not after some chunks went)
    sizes = [
        _ID_BYTES + decoding.wire_size(t) + decoding.wire_size(k) for t, k in zip(texts, keys, strict=True)
    ]
    if not texts:
        return []
    conn.refuse_writes(f"enqueue_many {q}")
    answers: list[str] = []
    for start, end in _chunks(sizes, chunk):
        argv: list[object] = list(shared)
        for payload, key in zip(texts[start:end], keys[start:end], strict=True):
            argv += (new_id(), payload, key)
        answers += conn.run("enqueue_many", [base(q)], argv, verb="enqueue_many", queue=q)
    return answers


# the bytes of a generated id (`j_` + a ULID)
_ID_BYTES = 28


def _chunks(sizes: list[int], most: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each call's jobs, whose bytes are `sizes`: at most `most` of
    them and about BYTE_BUDGET bytes (one job at least, however large)."""
    start = 0
    while start < len(sizes):
        end, size = start, 0
        while end < len(sizes) and end - start < most:
            size += sizes[end]
            if end > start and size > BYTE_BUDGET:
                break
            end += 1
        yield start, end
        start = end


def is_paused(conn: Connection, q: str) -> bool:
    """One HGET of the paused field; any value means paused. A wire fault raises `WireError`."""
    return conn.command("HGET", queue_key(q, "meta"), "paused") is not None


def paused_for_claim(conn: Connection, q: str) -> bool | None:
    """The claim's pause read: True when paused, False when not, and None when the
    read met a wire fault, which reads as not paused (None is falsy)."""
    # EchoMQ.Admin's paused?/2 (the Elixir original): a wire fault reads as not paused,
    # and the claim goes on.
    try:
        return is_paused(conn, q)
    except WireError:
        return None


def claimed(reply: list) -> Claimed | None:
    """A claim script's reply as a `Claimed`, or None for `{}` (nothing to serve)
    (the transition table's decoder; `Connection.run` applies it)."""
    return transitions.decode(transitions.CLAIMED, reply, transitions.Call("claim2"))


# Claim calls one claim makes at most while each answers MORE: a call drops at most
# CLAIM_SKIPS (500) ghosts or passes over that many lanes (lua/includes/activate.lua),
# a few ms of the server each; 20 of them, back to back, reach a job behind 10,000
# ghosts, and the server serves every other client between two of them.
CLAIM_CALLS = 20
# the claims' optional last ARGV (the toolkit's): answer MORE for a call stopped at its
# bound, which EchoMQ's own callers (who never send it) get as {}
ASK_MORE = "1"


def claim_calls(
    conn: Connection, q: str, name: str, keys: list[str], lease_ms: int, calls: int = CLAIM_CALLS
) -> Claimed | None | str:
    """Run claim transition `name` (`claim2`, `gclaim2`) behind the pause gate, again
    while a call answers MORE, `calls` calls at most: the `Claimed`, None (paused, or
    nothing to serve), or MORE (each call stopped at its bound: claim again at once).

    The gate: the script executor reads the paused field in its own round trip before
    each call (`paused_for_claim`); a wire fault there reads as not paused and the
    claim goes on as the twin that reads the field itself. The function and native
    executors fold the read into the call. A native command gets EchoMQ's own
    arguments (no ASK_MORE).
    """
    got: Claimed | None | str = MORE
    for _ in range(calls):
        folded = False
        if not conn.folds_pause:
            paused = paused_for_claim(conn, q)
            if paused:
                return None
            folded = paused is None
        args = [check_lease(lease_ms), conn.token]
        if transitions.get(name).body(conn.executor, folded)[0] != "native":
            args.append(ASK_MORE)
        got = conn.run(name, keys, args, folded=folded, verb="claim", queue=q)
        if got != MORE:
            return got
    return got


def gated_claim(conn: Connection, q: str, name: str, keys: list[str], lease_ms: int) -> Claimed | None:
    """`claim_calls` as a claim answers: the `Claimed`, or None (paused, nothing to
    serve, or CLAIM_CALLS calls that each stopped at their bound: the rest of the
    ghosts are the next claim's)."""
    got = claim_calls(conn, q, name, keys, lease_ms)
    return None if got == MORE else got  # type: ignore[return-value]


def claim_transition(q: str, grouped: bool = False) -> tuple[str, list[str]]:
    """The claim transition and its keys: `gclaim2` off the lanes' ring when
    `grouped` (as `lanes.claim` sends it), else `claim2` off pending."""
    head = queue_key(q, "ring") if grouped else queue_key(q, "pending")
    return ("gclaim2" if grouped else "claim2"), [head, queue_key(q, "active"), base(q)]


@contract("claim", writes=True)
@audit.audited("claim")
def claim(conn: Connection, q: str, lease_ms: int = 30_000) -> Claimed | None:
    """Serve the head of pending: a `Claimed` (id, payload, attempts), or None when empty
    or paused (the gate: `claim_calls`). Ghosts at the head are dropped on the way, at
    most CLAIM_SKIPS a call, in up to CLAIM_CALLS calls (past that: None, and the next
    claim goes on). The row's `owner` is the connection's token: `complete` and `fail`
    from another connection refuse `NotOwner`. Refuses `BadRow` for a head no
    transition can read (left at the head, nothing written), a `lease_ms` outside 1 ..
    a year (`BadInput`, before any I/O).
    """
    check_lease(lease_ms)
    name, keys = claim_transition(q)
    return gated_claim(conn, q, name, keys, lease_ms)


@contract("complete", writes=True)
@audit.audited("complete", job="job_id")
def complete(conn: Connection, q: str, job_id: str, *, token: str | None = None) -> None:
    """The job is done: row, logs and lock deleted, metrics bumped, lane slot given back.

    Refuses `Gone` (no row), `NotActive` (the job is not in flight), `NotOwner`
    (a claim with another token owns it now: this worker's lease was lost), and
    `BadRow` (a field no transition can read); each refusal writes nothing.
    `token` is the claim's token, the connection's own by default.
    """
    conn.run(
        "complete",
        [job_key(q, job_id), queue_key(q, "active"), base(q)],
        [job_id, _token(conn, token)],
        verb="complete",
        queue=q,
        job=job_id,
    )


@contract("fail", writes=True)
@audit.audited("fail", job="job_id")
def fail(
    conn: Connection,
    q: str,
    job_id: str,
    error: str,
    *,
    token: str | None = None,
    pipeline: Pipeline | None = None,
) -> str:
    """The job failed: `"retry"` (scheduled with exponential backoff) or `"dead"`.

    `failures` counted and `last_error` written either way. Refuses `Gone`,
    `NotActive`, `NotOwner` and `BadRow` as `complete` does, writing nothing.
    With `pipeline`, queued there as `enqueue` is (this call answers None).
    """
    return conn.run(
        "fail",
        [job_key(q, job_id), queue_key(q, "active"), base(q)],
        [job_id, str(error), _token(conn, token)],
        verb="fail",
        queue=q,
        job=job_id,
        pipeline=pipeline,
    )


def _token(conn: Connection, token: str | None) -> str:
    return conn.token if token is None else check_text(token, "token")


@audit.audited("expire")
def expire_leases(conn: Connection, q: str, budget: int = MOVE_BUDGET) -> int:
    """In-flight jobs whose lease passed go back to pending (or their lane), `stalled`
    counted: ONE bounded call of at most `budget` members, in a lap that goes on where
    this connection's last call for the queue stopped. Answers how many went back. A
    ghost leaves active (uncounted); a bad row or a foreign id stays, announced once a
    lap (`bad_row`). Refuses a budget above `defaults.MAX_MOVE_BUDGET` (`BadInput`,
    before any I/O). Recorded when an operator types it, never from a worker.
    """
    move_budget(budget)
    return _lap(conn, q, "expire", queue_key(q, "active"), budget)


@audit.audited("promote-due")
def promote(conn: Connection, q: str, budget: int = MOVE_BUDGET) -> int:
    """Due scheduled jobs become ready (pending, or their lane): ONE bounded call.
    Answers how many.

    Ghosts, bad rows and foreign ids are handled, the budget counted and checked, and
    the call recorded (verb `promote-due`) when an operator types it, as in
    `expire_leases`.
    """
    move_budget(budget)
    return _lap(conn, q, "promote", queue_key(q, "schedule"), budget)


# where each housekeeping lap stands, per connection and (script, queue): the place
# (score, member) the last call ended at, while due members follow it
_laps: weakref.WeakKeyDictionary[Connection, dict[tuple[str, str], tuple[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def _lap(conn: Connection, q: str, name: str, key: str, budget: int) -> int:
    """One call of @promote or @expire, from where this connection's lap stands; a
    call that reaches the last due member ends the lap (the next starts again)."""
    laps = _laps.setdefault(conn, {})
    place = laps.get((name, q), ("", ""))
    argv = [budget, BYTE_BUDGET, *place]
    moved, score, member, more = conn.run(name, [key, base(q)], argv, verb=name, queue=q)
    if more:
        laps[(name, q)] = (score, member)
    else:
        laps.pop((name, q), None)
    return int(moved)


@contract("promote", writes=True)
@audit.audited("promote", job="job_id", single=True)
def promote_job(conn: Connection, q: str, job_id: str) -> None:
    """One scheduled job (delayed, or waiting to retry) becomes ready now: pending, or its
    lane for a grouped job, at its priority. Refuses `Gone`, `NotScheduled` (a job not
    in the schedule set) and `BadRow`; a refusal writes nothing.

    script: @promote_job
    precondition: the row exists and is in schedule
    writes: ZREM schedule, HSET state pending, ZADD pending at its priority (a grouped job:
        its lane); publishes `promoted`
    replies: None / Gone / NotScheduled
    native: none, a script only
    """
    conn.run(
        "promote_job",
        [job_key(q, job_id), queue_key(q, "schedule"), base(q)],
        [job_id],
        verb="promote",
        queue=q,
        job=job_id,
    )


# -- the per-job operator verbs ---------------------------------------------


@contract("data", writes=True)
@audit.audited("data", job="job_id", single=True)
def update_data(conn: Connection, q: str, job_id: str, payload: str) -> None:
    """Replace the row's payload. Refuses `Gone`, `BadRow` (field `type`) when another
    client wrote a key of another type where the row should be, and a payload over
    `defaults.MAX_PAYLOAD` bytes (`BadInput`, before any I/O); a refusal writes nothing.

    script: @update_data
    precondition: the row exists
    writes: HSET payload; publishes `data`
    replies: None / Gone
    native: none, a script only
    """
    conn.run(
        "update_data",
        [job_key(q, job_id), base(q)],
        [_payload(payload), job_id],
        verb="data",
        queue=q,
        job=job_id,
    )


@contract("progress", writes=True)
@audit.audited("progress", job="job_id", single=True)
def update_progress(conn: Connection, q: str, job_id: str, progress: Any) -> None:
    """HSET progress, then PUBLISH `{"event":"progress","job":id,"progress":...}`. Refuses
    `Gone`, and `BadRow` (field `type`) for a key of another type where the row should be;
    a refusal writes and publishes nothing.

    script: @update_progress
    precondition: the row exists
    writes: HSET progress; PUBLISH {event: progress, job, progress}
    replies: None / Gone
    native: none, a script only
    """
    conn.run(
        "update_progress",
        [job_key(q, job_id)],
        [str(progress), job_id, base(q)],
        verb="progress",
        queue=q,
        job=job_id,
    )


@contract("log", writes=True)
@audit.audited("log", job="job_id", single=True)
def add_log(conn: Connection, q: str, job_id: str, line: str, keep: int | None = None) -> int:
    """RPUSH one line onto `:logs` (LTRIM to the last `keep`); answers the length. Refuses
    `Gone`, and `BadRow` (field `type`) for a key of another type where the row or its
    `:logs` list should be (note `field type in logs <id>`); a refusal writes nothing.

    script: @add_log
    precondition: the row exists
    writes: RPUSH :logs (LTRIM to the last `keep`)
    replies: int — the list length / Gone
    native: none, a script only
    """
    if keep is not None:
        whole(keep, "keep")
    return int(
        conn.run(
            "add_log",
            [job_key(q, job_id), logs_key(q, job_id), base(q)],
            [str(line), "" if keep is None else keep],
            verb="log",
            queue=q,
            job=job_id,
        )
    )


# the lines `get_job_logs` answers unless told: the last LOG_LINES of the list
LOG_LINES = 10_000
# the most lines one call reads (with about BYTE_BUDGET bytes)
PAGE_LINES = 5_000


class Lines(list):
    """A job's log lines (a list of str) with `.total`, the list's length when read:
    more than `len()` when only its last lines were asked for."""

    total: int

    def __init__(self, lines: Sequence[str] = (), total: int = 0):
        super().__init__(lines)
        self.total = max(total, len(self))


@contract("logs")
def get_job_logs(conn: Connection, q: str, job_id: str, limit: int | None = LOG_LINES) -> Lines:
    """The log lines in append order (`[]` when none): the last `limit` lines
    (`LOG_LINES` unless named, None for all), as a `Lines` list whose `.total` is the
    list's length, so a caller can say "the last 10,000 of 1,000,000". Refuses `Gone`,
    `BadRow` (field `type`) for a key of another type where the row or its `:logs` list
    should be, and a `limit` that is not a whole number from 1 (`BadInput`, before any I/O).

    Read in pages of at most `PAGE_LINES` lines and about `defaults.BYTE_BUDGET`
    bytes, one bounded call each: a list of a million lines never holds the server
    long. A list up to a page long is read in one call; a longer one written between
    two pages may show a line twice or miss one, as any paged read.

    script: @get_logs
    precondition: the row exists
    writes: nothing (a read)
    replies: list[str] in append order ([] when empty) / Gone
    native: none, a script only
    """
    if limit is not None:
        whole(limit, "limit")
    return read_logs(conn, q, job_id, job_key(q, job_id), limit)


def read_logs(conn: Connection, q: str, job_id: str, row: str, limit: int | None = LOG_LINES) -> Lines:
    """`get_job_logs` of the job whose row key is `row` (built by the caller: a move
    reads the logs of an id another node wrote, which the name gate would refuse)."""
    keys = [row, row + ":logs", base(q)]

    def page(first: int, most: int) -> tuple[int, int, list[str]]:
        total, at, *lines = conn.run(
            "get_logs", keys, [first, most, BYTE_BUDGET], verb="logs", queue=q, job=job_id
        )
        return int(total), int(at), lines

    total, at, lines = page(
        0 if limit is None else -limit, PAGE_LINES if limit is None else min(PAGE_LINES, limit)
    )
    end = total if limit is None else min(total, at + limit)
    at += len(lines)
    while at < end:
        _, _, more = page(at, min(PAGE_LINES, end - at))
        if not more:  # the list was trimmed meanwhile
            break
        lines += more
        at += len(more)
    return Lines(lines, total)


@contract("remove", writes=True)
@audit.audited("remove", job="job_id", single=True)
def remove_job(conn: Connection, q: str, job_id: str, dedup: str | None = None) -> None:
    """Remove the job from its set and lane (a lane slot given back when it was in
    flight), delete row and logs, release its dedup key (and `dedup` when supplied).
    Refuses `Gone` (a ghost, still a member of a set or lane, leaves them first) and
    `Locked` for a held job (a `:lock` key or a `lock` field). A key of another type
    where the row should be is removed like a row unless a `:lock` key holds the job:
    remove is the one verb that clears it; its fields unread, it leaves the four sets
    (not a lane) and releases only the `dedup` key supplied.

    script: @remove_job2
    precondition: the row exists and no worker holds it
    writes: ZREM from its set and lane (a lane slot given back when in flight), DEL row and
        :logs, release dedup; publishes `removed`
    replies: None / Gone / Locked (a :lock key or a lock field: untouched)
    native: none, a script only
    """
    if dedup is not None:
        check_text(dedup, "dedup key")
    conn.run(
        "remove_job2",
        [job_key(q, job_id), base(q)],
        [job_id, dedup or ""],
        verb="remove",
        queue=q,
        job=job_id,
    )


@contract("reprocess", writes=True)
@audit.audited("reprocess", job="job_id", single=True)
def reprocess_job(conn: Connection, q: str, job_id: str) -> None:
    """Move a dead job back to pending (a grouped one to its lane); counters stay,
    `last_error` goes, `state` becomes pending. On a paused queue it waits.

    Refuses `Gone`, `NotDead` and `BadRow` (field `type` for a key of another type where
    the row or its lane's meta should be). The function executor refuses a grouped
    dead row (`NotDead`, detail "reprocess lane not native"), as the native twin does.

    script: @reprocess2
    precondition: the row exists and is in dead
    writes: ZREM dead, HDEL last_error, HSET state pending, ZADD pending 0 (a grouped job:
        its lane and the ring); counters kept; publishes `reprocessed`
    replies: None / Gone / NotDead
    native: EMQ.REPROCESS 4 emq:{q}:job:<id> emq:{q}:dead emq:{q}:pending emq:{q}: <id> —
        reads dead membership before writing; refuses a grouped row (reprocess lane not
        native)
    """
    keys = [job_key(q, job_id), queue_key(q, "dead"), queue_key(q, "pending"), base(q)]
    conn.run("reprocess2", keys, [job_id], verb="reprocess", queue=q, job=job_id)


# the most fields a row may hold for `get_job` to list them all (one HKEYS, then each
# field's length and, within the byte budget, its bytes); a row of more (only another
# node writes one) is read by the names of JOB_FIELDS
ROW_FIELDS = 1000
# the fields EchoMQ's and the toolkit's transitions write on a job row (SPEC: the row)
JOB_FIELDS = (
    "payload",
    "state",
    "attempts",
    "failures",
    "stalled",
    "max_attempts",
    "priority",
    "backoff",
    "created_at",
    "due_at",
    "claimed_at",
    "group",
    "dedup",
    "owner",
    "lock",
    "progress",
    "last_error",
)
# the entry `get_job` adds in place of the fields of a row it did not list
OTHER_FIELDS = "<other fields>"
# the longest field name `get_job` sends back to the server to read a field by: a name
# read from a row another node wrote may be megabytes (the job's own are a dozen bytes)
SHORT_NAME = 256


@contract("job")
def get_job(conn: Connection, q: str, job_id: str) -> dict[str, str]:
    """The row as a dict of its fields, in the row's order. Refuses `Gone`, and `BadRow`
    (field `type`) for a key of another type where the row should be.

    A field over `defaults.MAX_WHOLE_FIELD` bytes is not read: it holds
    `decoding.not_read(length)`. A row is listed whole only when it holds at most
    `ROW_FIELDS` fields and measures at most `defaults.BYTE_BUDGET` bytes (MEMORY
    USAGE); any other row, and every row where MEMORY USAGE is not there (the embedded
    fake), shows the fields of `JOB_FIELDS` it holds, and `OTHER_FIELDS` how many more.
    Read in `@read_job` calls of about `defaults.BYTE_BUDGET` bytes (a field over that
    by an HGET of its own).

    script: @read_job
    precondition: the row exists
    writes: nothing (a read)
    replies: dict / Gone
    native: none, a read-only script (FCALL_RO with the function executor)
    """
    key = job_key(q, job_id)
    count, row = _read_job(conn, q, job_id, ())
    if not row:
        count, row = _read_job(conn, q, job_id, JOB_FIELDS)
        if count > len(row):
            row[OTHER_FIELDS] = _others(count)
    return _whole_fields(conn, q, job_id, key, row)


def _others(count: int) -> str:
    """What `OTHER_FIELDS` says of a row of `count` fields `get_job` did not list."""
    if count > ROW_FIELDS:
        return f"<{count:,} fields: over ROW_FIELDS ({ROW_FIELDS:,}), only the job's own read>"
    within = f"BYTE_BUDGET ({BYTE_BUDGET:,} bytes)"
    return f"<{count:,} fields: not measured within {within}, only the job's own read>"


def _read_job(conn: Connection, q: str, job_id: str, names: Sequence[str]) -> tuple[int, dict[str, Any]]:
    """One `@read_job` call: the row's field count and {name: bytes, or length when not
    read} of `names` (none: every field of a row of at most ROW_FIELDS); a named field
    the row lacks left out. Refuses `Gone`."""
    reply = conn.run(
        "read_job",
        [base(q)],
        [job_id, ROW_FIELDS, BYTE_BUDGET, BYTE_BUDGET, *names],
        verb="job",
        queue=q,
        job=job_id,
    )
    if reply == -1:
        raise Gone("job", q, job_id)
    count, *pairs = reply
    return int(count), {n: v for n, v in zip(pairs[0::2], pairs[1::2], strict=True) if v is not None}


def _whole_fields(conn: Connection, q: str, job_id: str, key: str, row: dict[str, Any]) -> dict[str, str]:
    """`row` with each field `@read_job` answered by its length read: up to
    `BYTE_BUDGET` by name in further calls, up to `MAX_WHOLE_FIELD` by a plain HGET
    each, a longer one as `decoding.not_read`; one named over `SHORT_NAME` bytes is not
    asked by its name (`decoding.not_read`, bound SHORT_NAME). A field gone meanwhile is
    left out."""
    for name, size in row.items():
        if isinstance(size, int) and len(name) > SHORT_NAME:
            row[name] = decoding.not_read(size, "SHORT_NAME")
    while small := [n for n, v in row.items() if isinstance(v, int) and v <= BYTE_BUDGET]:
        # each call reads the first name at least, so each round settles one field
        _, got = _read_job(conn, q, job_id, small)
        for name in small:
            if name in got:
                row[name] = got[name]
            else:
                del row[name]
    for name, size in list(row.items()):
        if not isinstance(size, int):
            continue
        value = conn.command("HGET", key, name) if size <= MAX_WHOLE_FIELD else decoding.not_read(size)
        if value is None:
            del row[name]
        else:
            row[name] = value
    return row


def whole_field(conn: Connection, q: str, job_id: str, name: str) -> str | None:
    """Field `name` of a job row, read as `get_job` reads it: its bytes, or
    `decoding.not_read(length)` over `MAX_WHOLE_FIELD`; None when the row or the field
    is missing, or the row's key is of another type than a hash (another client's)."""
    try:
        _, row = _read_job(conn, q, job_id, (name,))
        return _whole_fields(conn, q, job_id, job_key(q, job_id, gate=False), row).get(name)
    except (Gone, BadRow):
        return None
