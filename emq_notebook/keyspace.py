"""The keyspace: key builders, byte-exact to the wire contract, and the name gate.

Every key of queue `q` lives under `emq:{q}:`, one cluster slot.  Names and ids
are checked HERE, before any I/O: a name that could escape its key (braces,
`:`, whitespace, control characters, glob characters, empty, over-long) raises
`InvalidName`; so does one starting with `-`, which a command line reads as an option.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ulid import ULIDGenerator

from .decoding import wire_size
from .errors import InvalidName

MAX_NAME = 128
# the longest id, in bytes, a verb addresses (Lua's `MAX_ID`, rendered from this one:
# scripts.constants)
MAX_SERVER_ID = 65_536
# a job row's whole-number fields and what an absent one reads as (Lua's `ROW_WHOLES`)
ROW_WHOLES = (
    ("attempts", 0),
    ("failures", 0),
    ("stalled", 0),
    ("max_attempts", 1),
    ("backoff", 1000),
    ("priority", 0),
)
# the most members a script's walk reads at once (Lua's `WALK_CHUNK`, lua/includes/chunks.lua)
WALK_CHUNK = 8
# the most lanes one call examines by name (Lua's `LANES_A_CALL`: @drain, a completion's page)
LANES_A_CALL = 2000
# letters, digits and `_ . - @ +`; nothing a key, a hash tag or a SCAN glob reads specially
_SAFE = re.compile(r"[A-Za-z0-9_.@+\-]+\Z")
STATES = ("pending", "active", "schedule", "dead")
# monotonic within a millisecond, so ids made in one process sort in the order made
_ids = ULIDGenerator()


def check_name(value: object, what: str = "queue name") -> str:
    """Return `value` when it is a safe key part, else raise `InvalidName`."""
    if value.__class__ is str and value in _passed:
        return value
    if not isinstance(value, str):
        raise InvalidName(f"{what} must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidName(f"{what} is empty")
    if len(value) > MAX_NAME:
        raise InvalidName(f"{what} is over {MAX_NAME} characters")
    if not _SAFE.match(value):
        raise InvalidName(f"{what} {value!r} may hold only letters, digits and _ . - @ +")
    if value.startswith("-"):
        # `-h`, `--yes`: a command line would read it as an option, and no line could name it
        raise InvalidName(f"{what} {value!r} starts with -, which a command line reads as an option")
    if len(_passed) >= _PASSED_KEPT:
        _passed.clear()
    _passed.add(value)
    return value


# names that passed the gate, so the several keys of one call check a name once
# (plain `str` only: a subclass could answer differently; cleared when full)
_passed: set[str] = set()
_PASSED_KEPT = 4096


def check_server_id(value: object, what: str = "job id") -> str:
    """Return `value`, an id as a set holds it (read from the server), addressed as it
    is: another node may write ids the name gate refuses (`ord:17`, `a b`). Refuses
    (`InvalidName`) a non-string; an id ending `:logs` or `:lock` (its row key would be
    another job's logs or lock; the scripts' `foreign_id` holds the same rule); an id
    over `MAX_SERVER_ID` bytes, which a script would hash and copy at each key it names.
    A bulk verb leaves such an id where it is and reports it."""
    if not isinstance(value, str):
        raise InvalidName(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > MAX_SERVER_ID // 4 and wire_size(value) > MAX_SERVER_ID:
        raise InvalidName(f"{what} {value[:40]!r}... is over {MAX_SERVER_ID:,} bytes: no verb addresses it")
    if value.endswith((":logs", ":lock")):
        raise InvalidName(f"{what} {value[:80]!r} names another job's {value[-4:]} key")
    return value


def check_text(value: object, what: str, limit: int = 512) -> str:
    """A free-text field (a dedup key, a hash field): non-empty, bounded, no control characters."""
    if not isinstance(value, str) or not value:
        raise InvalidName(f"{what} must be a non-empty string")
    if len(value) > limit:
        raise InvalidName(f"{what} is over {limit} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidName(f"{what} holds a control character")
    return value


def queue_key(q: str, suffix: str) -> str:
    """`emq:{q}:<suffix>`; `queue_key(q, "")` is the base root every script derives from."""
    return f"emq:{{{check_name(q)}}}:{suffix}"


def base(q: str) -> str:
    return queue_key(q, "")


def job_key(q: str, job_id: str, gate: bool = True) -> str:
    """A job's row, `emq:{q}:job:<id>`. `gate=False` for an id read from the server,
    addressed as it is (`check_server_id`)."""
    return queue_key(q, "job:" + (check_name(job_id, "job id") if gate else job_id))


def logs_key(q: str, job_id: str, gate: bool = True) -> str:
    return job_key(q, job_id, gate) + ":logs"


def lock_key(q: str, job_id: str, gate: bool = True) -> str:
    return job_key(q, job_id, gate) + ":lock"


def lane_key(q: str, group: str, gate: bool = True) -> str:
    """A group's lane backlog, `emq:{q}:g:<g>:pending`. `gate=False` for a lane name
    read from the server (`emq:{q}:groups`), which another node may have written
    outside the name gate (`tenant 42`): addressed as it is, as the `{q}` hash tag comes
    first, so no lane name moves the key to another slot or queue."""
    return queue_key(q, "g:" + (check_name(group, "group") if gate else group) + ":pending")


def lane_meta_key(q: str, group: str, gate: bool = True) -> str:
    """Lane bookkeeping (extension): `limit`, `active`, `paused`, `ring` (`gate` as
    `lane_key`'s)."""
    return queue_key(q, "g:" + (check_name(group, "group") if gate else group) + ":meta")


def sets(q: str, states: Iterable[str], groups: Iterable[str]) -> list[tuple[str, str]]:
    """(state, key) of each set that holds `states`' jobs, in order: each state's set,
    and right after `pending` each lane's backlog (a lane's jobs are pending too), lanes
    in byte order, `groups` as read from the server (`lane_sets`)."""
    out = []
    for state in states:
        out.append((state, queue_key(q, state)))
        if state == "pending":
            out += [("pending", key) for _, key in lane_sets(q, groups)]
    return out


def lane_sets(q: str, groups: Iterable[str]) -> list[tuple[str, str]]:
    """(group, backlog key) of each lane, in byte order: `groups` as read from the
    server, addressed as they are (`lane_key(..., gate=False)`)."""
    return [(g, lane_key(q, g, gate=False)) for g in sorted(groups)]


def events_channel(q: str) -> str:
    return queue_key(q, "events")


# -- moves between queues (extension, transfer.py) ---------------------------
# a batch's name: `b_` + a ULID, made here, so a key built of it stays one key part
_BATCH = re.compile(r"b_[0-9A-Z]{26}\Z")


def new_batch() -> str:
    """A move batch's name: `b_` + a ULID (each move call's batches sort in the order made)."""
    return "b_" + str(_ids.generate())


def check_batch(value: object) -> str:
    """`value` when it is a batch name as `new_batch` makes them, else `InvalidName`
    (a name read from a journal another client wrote is checked before a key is built)."""
    if not isinstance(value, str) or not _BATCH.match(value):
        raise InvalidName(f"move batch {str(value)[:80]!r} is not a batch name (b_ and a ULID)")
    return value


def moving_key(q: str) -> str:
    """`emq:{q}:moving`: the journal of moves out of `q`, a hash batch -> "<owner> <lease
    until, ms> <target>"; each batch's jobs are in `moving_batch_key`. Under `emq:{q}:`, so
    an obliterate of `q` takes it."""
    return queue_key(q, "moving")


def moving_batch_key(q: str, batch: str) -> str:
    """`emq:{q}:moving:<batch>`: the jobs of one batch on their way out, id -> "<state>
    <score>" (the set and the score each goes back to when it stays)."""
    return queue_key(q, "moving:" + check_batch(batch))


def arrived_key(q: str, batch: str) -> str:
    """`emq:{q}:arrived:<batch>`: the ids a batch wrote into target `q` (a set with a time
    to live), so writing the batch again never writes a job twice."""
    return queue_key(q, "arrived:" + check_batch(batch))


def queue_from_key(key: str) -> str | None:
    """The queue name inside `emq:{q}:...`, or None for a key that is not ours."""
    if not key.startswith("emq:{"):
        return None
    end = key.find("}:", 5)
    return key[5:end] if end > 5 else None


# the audit trail's streams: `{q}` is the queue's hash tag (its cluster slot), and the key
# is OUTSIDE `emq:{q}:`, so an obliterate's "ok" leaves the record of it
AUDIT_PREFIX = "emq:audit:"
AUDIT_MATCH = AUDIT_PREFIX + "{*}"
# an entry's fields, in the stream's order: what was done, then who did it
AUDIT_WHAT = ("verb", "outcome", "count", "ids", "args")
AUDIT_WHO = ("who", "acl_user", "conn", "env", "surface", "notebook", "reason")


def audit_key(q: str) -> str:
    """`emq:audit:{q}`, queue `q`'s audit stream."""
    return f"{AUDIT_PREFIX}{{{check_name(q)}}}"


def queue_from_audit_key(key: str) -> str | None:
    """The queue name inside `emq:audit:{q}`, or None for a key that is not one."""
    if not key.startswith(AUDIT_PREFIX + "{") or not key.endswith("}"):
        return None
    return key[len(AUDIT_PREFIX) + 1 : -1] or None


def new_id() -> str:
    """A branded, time-sortable id: `j_` + a 26-character ULID (id order = enqueue order)."""
    return "j_" + str(_ids.generate())


# -- health and latency (extension) ------------------------------------------
METRIC_KINDS = ("claimed", "completed", "failed")
LATENCY_KINDS = ("wait", "run")


def metrics_key(q: str, kind: str) -> str:
    """`emq:{q}:metrics:<kind>`: a hash minute -> count of claims, completions or failures."""
    if kind not in METRIC_KINDS:
        raise InvalidName(f"metrics kind {kind!r} is one of {', '.join(METRIC_KINDS)}")
    return queue_key(q, "metrics:" + kind)


def latency_key(q: str, kind: str, minute: int) -> str:
    """`emq:{q}:lat:<wait|run>:<minute>`: a hash bucket -> count, one per minute."""
    if kind not in LATENCY_KINDS:
        raise InvalidName(f"latency kind {kind!r} is one of {', '.join(LATENCY_KINDS)}")
    if isinstance(minute, bool) or not isinstance(minute, int) or minute < 0:
        raise InvalidName(f"a minute is a whole number >= 0, not {minute!r}")
    return queue_key(q, f"lat:{kind}:{minute}")


def latency_index_key(q: str) -> str:
    """`emq:{q}:lat:minutes`: the minutes that have histograms (a zset, score = minute)."""
    return queue_key(q, "lat:minutes")
