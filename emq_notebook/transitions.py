"""The transition table: each Lua transition, the body each executor runs for it,
and how its reply becomes a result.

One row per transition (`TABLE`), named as its script `lua/<name>.lua`: the `script`
executor sends EVALSHA of it, `function` FCALL of `emq_<twin or name>`, `native` the
EchoMQ node's command when it has one, else EVALSHA of the twin (or the script).
A `twin` is the script with the native semantics (`native_claim`: the paused read
folded into the claim; `native_reprocess`: dead membership read first, a grouped row
refused); `folds_pause` says the twin reads the paused field itself (a caller whose
own pause read met a wire fault asks for the twin: `folded=True`).

Every reply is decoded here (`decode`): an `EMQSTATE ...` error is the typed refusal
`errors.refusal_for` names. A script with no row runs as `lua/<name>.lua` by every
executor, its reply as sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from .errors import EMQError, Gone, refusal_for


class Reply(Enum):
    """How a reply becomes a result: the cases of `decode`."""

    AS_SENT = "the reply itself"
    CLAIMED = "{} -> None; 'more' -> MORE; {id, payload, attempts} -> Claimed"
    FOUND = "-1 (no row) -> Gone; anything else as sent"
    MORE_OR_OK = '1 -> "more" (call again), 0 -> "ok" (done); {1 or 0, n} -> ("more" or "ok", n)'
    COUNTED = "{n, more[, cursor]} -> (n, more as a bool[, the cursor to send next])"
    PER_ID = "{budget, bytes, id...}: one word per id examined -> {id: word} (the first ids)"
    HOLDER = "{id, created} -> the id that answers (the holder)"


AS_SENT, CLAIMED, FOUND, MORE_OR_OK = Reply.AS_SENT, Reply.CLAIMED, Reply.FOUND, Reply.MORE_OR_OK
COUNTED, PER_ID, HOLDER = Reply.COUNTED, Reply.PER_ID, Reply.HOLDER

# what a claim answers that stopped at its bound with more to look at (ghosts, lanes:
# lua/includes/activate.lua), when its caller asked to tell that from an empty queue
MORE = "more"


class Claimed(NamedTuple):
    """What a claim hands a worker: the job's id, its payload, and the attempt this is."""

    id: str
    payload: str
    attempts: int


@dataclass(frozen=True)
class Call:
    """What a decoder knows of the call it decodes: the transition and its arguments,
    and the verb, queue and job a refusal names."""

    name: str
    keys: Sequence[Any] = ()
    args: Sequence[Any] = ()
    verb: str = ""
    queue: str = ""
    job: str | None = None


@dataclass(frozen=True)
class Transition:
    name: str  # the transition and its script, lua/<name>.lua
    reply: Reply = AS_SENT  # the reply kind: one case of `decode`
    twin: str | None = None  # the script with the native semantics, lua/<twin>.lua
    native: str | None = None  # the native command of an EchoMQ node (EMQ.*), or None
    folds_pause: bool = False  # the twin and the native command read the paused field
    echomq: bool = False  # EchoMQ's own: its name, KEYS and ARGV are the wire contract

    @property
    def function(self) -> str:
        """The function executor's library function."""
        return "emq_" + (self.twin or self.name)

    def body(self, executor: str, folded: bool = False) -> tuple[str, str]:
        """(how, what) the executor runs: ("script", a script name) for EVALSHA,
        ("function", a script name) for FCALL of its library function, or ("native",
        the command). `folded` asks the script executor for the twin."""
        if executor == "native" and self.native:
            return "native", self.native
        if executor == "function":
            return "function", self.twin or self.name
        if executor == "native" or folded:
            return "script", self.twin or self.name
        return "script", self.name

    def folds(self, executor: str, folded: bool = False) -> bool:
        """True when the body `executor` runs reads the paused field itself."""
        return self.folds_pause and (executor != "script" or folded)


TABLE: dict[str, Transition] = {
    t.name: t
    for t in (
        # EchoMQ's own transitions (the Elixir Admin and Jobs): names, KEYS and ARGV as they are
        Transition("pause", echomq=True),
        Transition("resume", echomq=True),
        Transition("drain", COUNTED, echomq=True),
        Transition("obliterate", MORE_OR_OK, echomq=True),
        Transition("update_progress", FOUND, echomq=True),
        Transition("reprocess2", FOUND, twin="native_reprocess", native="EMQ.REPROCESS", echomq=True),
        Transition("remove_job2", FOUND, echomq=True),
        Transition("claim2", CLAIMED, twin="native_claim", native="EMQ.CLAIM", folds_pause=True, echomq=True),
        Transition("gclaim2", CLAIMED, twin="native_gclaim", folds_pause=True, echomq=True),
        # the rest (lua/README.md states their one convention)
        Transition("enqueue", HOLDER),
        Transition("enqueue_many"),
        Transition("complete", FOUND),
        Transition("fail", FOUND),
        Transition("expire"),
        Transition("promote"),
        Transition("promote_job", FOUND),
        Transition("update_data", FOUND),
        Transition("add_log", FOUND),
        Transition("get_logs", FOUND),
        Transition("read_rows"),
        Transition("read_job"),
        Transition("read_members"),
        Transition("read_dead_page"),
        Transition("read_repeats"),
        Transition("read_lanes"),
        Transition("read_audit"),
        Transition("read_ends"),
        Transition("read_watch"),
        Transition("read_monitor"),
        Transition("lane_backlog"),
        Transition("lane_set"),
        Transition("reprocess_dead"),
        Transition("reprocess_dead_check"),
        Transition("reprocess_jobs", PER_ID),
        Transition("reprocess_jobs_check", PER_ID),
        Transition("remove_jobs", PER_ID),
        Transition("remove_jobs_check", PER_ID),
        Transition("repeat_add"),
        Transition("repeat_remove"),
        Transition("repeat_run_now", FOUND),
        Transition("repeat_tick"),
        Transition("find"),
        Transition("errors"),
        # export, import and move (transfer.py)
        Transition("read_whole_rows"),
        Transition("import_rows"),
        Transition("move_take"),
        Transition("move_put"),
        Transition("move_hold"),
        Transition("move_clear"),
    )
}


def get(name: str) -> Transition:
    """The row for `name`; a script with no row runs with the default (its own body
    under every executor, its reply as sent)."""
    return TABLE.get(name) or Transition(name)


def decode(kind: Reply, reply: Any, call: Call) -> Any:
    """The one switch from a transition's reply to its result (`Reply` says each case)."""
    match kind:
        case Reply.AS_SENT:
            return reply
        case Reply.CLAIMED:
            if not reply:
                return None
            if reply == MORE:
                return MORE
            job_id, payload, attempts = reply
            return Claimed(job_id, payload, int(attempts))
        case Reply.FOUND:
            if reply == -1:
                raise Gone(call.verb or call.name, call.queue, call.job)
            return reply
        case Reply.MORE_OR_OK:
            if isinstance(reply, list):  # asked for the jobs it deleted too (@obliterate's ARGV[4])
                more, n = reply
                return ("ok" if more == 0 else "more"), int(n)
            return "ok" if reply == 0 else "more"
        case Reply.COUNTED:
            if not isinstance(reply, list):  # EchoMQ's own unbounded drain: the count
                return int(reply), False
            if len(reply) == 3:  # a drain walking the lanes on from a cursor
                n, more, cursor = reply
                return int(n), bool(more), str(cursor)
            n, more = reply
            return int(n), bool(more)
        case Reply.PER_ID:
            # a step that spent its budget answers the first ids only: the caller
            # sends the rest again
            ids = call.args[2:]
            if len(reply) > len(ids):
                raise ValueError(f"{call.name} answered {len(reply)} words for {len(ids)} ids")
            return dict(zip(ids, reply, strict=False))
        case Reply.HOLDER:
            return reply[0]
    raise ValueError(f"no reply kind {kind!r}")


def error(text: str, call: Call) -> EMQError:
    """An error reply as the typed answer: an `EMQSTATE ...` refusal is its `Refused`
    subclass (`errors.refusal_for`), anything else an `EMQError` naming the verb."""
    typed = refusal_for(text)
    if typed is not None:
        cls, note = typed
        return cls(call.verb or call.name, call.queue, call.job, detail=text, note=note)
    return EMQError(f"server error in {call.verb or call.name}: {text}")
