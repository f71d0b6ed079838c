"""The typed answers: every refusal and every error the toolkit raises.

A *refusal* (`Refused` and its subclasses) is the queue saying no: the
transition's precondition did not hold and nothing was written.  An *error*
(`EMQError` that is not a refusal) is something wrong with the request or the
wire.  Both render as one short line in a notebook (`_render_traceback_`), so
IPython prints no traceback, yet the cell still counts as failed for nbval and
"Run all" (IPython's plain `UsageError` would not fail the cell under nbval).
"""

from __future__ import annotations

import html
import re


class EMQError(Exception):
    """Base of everything the toolkit raises on purpose.

    Raised part way through a bulk verb (refused at its fifth call, cut on the wire),
    it says what the verb had changed before (`ended_after`): `.done` is that count
    of jobs, and its line ends with it ("..., after deleting 2,000 jobs")."""

    # the jobs a bulk verb had changed when this ended it (None: not a bulk verb's)
    done: int | None = None
    # what its line ends with: "after deleting 2,000 jobs" ("" while none)
    after = ""

    def __str__(self) -> str:
        said = super().__str__()
        return f"{said}, {self.after}" if self.after else said

    def _render_traceback_(self) -> list[str]:
        # a note (the audit trail's `audit_failed: ...`) ends the same line
        notes = "".join(f" · {n}" for n in getattr(self, "__notes__", ()))
        return [f"{type(self).__name__}: {self}{notes}"]


class InvalidName(EMQError, ValueError):
    """A queue name, job id or group that could escape its key; raised before any I/O."""


class UsageProblem(EMQError, ValueError):
    """A command line that does not parse: unknown verb, bad option, bad duration."""


class BadInput(EMQError, ValueError):
    """A value that parses but cannot be used: malformed JSON, a zero budget."""


class BadRecord(BadInput):
    """A record of an import file that would not be a valid job row; `.line` is its line
    (a Parquet file's row) number, from 1. Raised before anything is written."""

    def __init__(self, message: str, line: int = 0):
        self.line = line
        super().__init__(message)

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        return (type(self), (str(self), self.line))


class WireError(EMQError, ConnectionError):
    """The server could not be reached or dropped the connection."""


class ReadOnly(EMQError):
    """A writing verb on a read-only connection; raised before any I/O."""


class UnknownQueue(EMQError, LookupError):
    """A queue named explicitly that has no key on the server (no meta hash and every
    set empty): a typo is not an idle queue. Raised by `frames.counts` and
    `frames.health` for a named queue, so by `%emq status` and `%emq health` too."""


class Halted(EMQError):
    """A controlled retry stopped: too many of its trial jobs died again.

    `.moved` is how many jobs it moved back, `.failed_again` how many of those
    were dead again when it looked.
    """

    def __init__(self, message: str, moved: int = 0, failed_again: int = 0):
        self.moved, self.failed_again = moved, failed_again
        super().__init__(message)

    def __reduce__(self) -> tuple[type, tuple[str, int, int]]:
        return (type(self), (str(self), self.moved, self.failed_again))


class QueueInUse(EMQError):
    """A demo pointed at a server that already holds a queue of the demo's name (a key
    under `emq:{q}:`) which no demo created; raised before the demo writes anything."""


class PreconditionFailed(EMQError):
    """A runbook step came to write and its precondition no longer held (the queue
    was resumed, the jobs moved): the notebook stops there, that step wrote nothing."""


class OutcomeNotReached(EMQError):
    """A runbook's last cell: the outcome it was run for does not hold on the server."""


class NativeUnavailable(EMQError):
    """executor="native" on a server without the EchoMQ module's EMQ.* commands."""


class Refused(EMQError):
    """A fenced transition refused; the keyspace is unchanged.

    `.reason` is the wire word (`gone`, `locked`, `not_dead`, `not_paused`,
    `active`, `not_active`, `not_owner`, `not_scheduled`, `bad_row`, `too_long`); `.verb`,
    `.queue` and `.job` say what was refused.  Displayed (a cell's result, `display`,
    a saved notebook) it is its one line, as text and as HTML.
    """

    reason = "refused"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "reason" not in cls.__dict__:  # the wire word is the name: NotDead says not_dead
            cls.reason = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()

    def __init__(
        self, verb: str = "", queue: str = "", job: str | None = None, detail: str = "", note: str = ""
    ):
        self.verb, self.queue, self.job, self.detail, self.note = verb, queue, job, detail, note
        super().__init__(self.line())

    def line(self) -> str:
        """The one line an operator sees: `refused: reprocess mail j_... — not_dead`,
        and what a bulk verb had done before (`ended_after`): `refused: obliterate mail
        — not_paused, after deleting 2,000 jobs`."""
        target = " ".join(p for p in (self.verb, self.queue, self.job) if p)
        said = f"refused: {target} — {self.reason}" if target else f"refused: {self.reason}"
        said = f"{said} ({self.note})" if self.note else said
        return f"{said}, {self.after}" if self.after else said

    def __str__(self) -> str:
        return self.line()

    def __reduce__(self) -> tuple[type, tuple[str, str, str | None, str, str]]:
        return (type(self), (self.verb, self.queue, self.job, self.detail, self.note))

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> tuple[dict, dict]:
        line = self.line()
        return ({"text/plain": line, "text/html": f"<pre>{html.escape(line)}</pre>"}, {})


class Gone(Refused):
    """No such job row."""


class Locked(Refused):
    """A worker holds the job (a `:lock` key or a `lock` field)."""


class NotDead(Refused):
    """Reprocess of a job that is not in the dead set."""


class NotPaused(Refused):
    """Obliterate of a queue that is still running: pause it first."""


class ActiveJobs(Refused):
    """Obliterate of a queue with jobs in flight, unforced."""

    reason = "active"


class NotActive(Refused):
    """Complete or fail of a job that is not in flight (extension)."""


class NotOwner(Refused):
    """Complete or fail by a worker whose lease was lost: another claim owns the job now."""


class NotScheduled(Refused):
    """Promote of a job that is not in the schedule set."""


class TooLong(Refused, BadInput):
    """A value over the bound the server keeps for it (a repeatable's definition over
    `repeat.DEF_BYTES` once written as JSON, which no tick would read): nothing written.
    A `BadInput` too, as the client's own check of the same bound before any I/O."""


class BadRow(Refused):
    """A row (written by another node, or by hand) with a field the transition cannot
    read, e.g. a non-numeric `attempts`; the job is left exactly where it was."""


# The ONE place a server's `EMQSTATE ...` error reply becomes a typed refusal
# (class, and a note for the line). Longest first: "reprocess lane not native"
# must not read as a plain "not dead".
_EMQSTATE = (
    ("reprocess lane not native", NotDead, "a grouped row: the native twin does not carry lanes"),
    ("not paused", NotPaused, ""),
    ("active jobs", ActiveJobs, ""),
    ("not dead", NotDead, ""),
    ("not active", NotActive, ""),
    ("not owner", NotOwner, ""),
    ("not scheduled", NotScheduled, ""),
    ("too long", TooLong, "{rest}"),
    ("bad row", BadRow, "field {rest}"),
    ("locked", Locked, ""),
    ("gone", Gone, ""),
)


def ended_after(exc: BaseException, done: int, doing: str) -> None:
    """Say on `exc`, which ended a bulk verb part way, the `done` jobs it had changed
    (`doing`: "deleting"): `.done`, and at the end of its line "after deleting 2,000
    jobs" (an exception that is no `EMQError`, an interrupt, carries it as a note)."""
    exc.done = done  # type: ignore[attr-defined]
    if not done or isinstance(exc, Halted):  # a halt's line says what it moved
        return
    after = f"after {doing} {done:,} job{'' if done == 1 else 's'}"
    if isinstance(exc, EMQError):
        exc.after = after
    else:
        exc.add_note(after)


def refusal_table() -> list[tuple[str, str]]:
    """(prefix, reason) of each `EMQSTATE` refusal, in the order `refusal_for` reads
    them: the audited twins of the scripts name a refusal from the same table."""
    return [(prefix, cls.reason) for prefix, cls, _ in _EMQSTATE]


def refusal_for(message: str) -> tuple[type[Refused], str] | None:
    """(refusal class, note) for a server error text, or None when it is not EMQSTATE."""
    if not message.startswith("EMQSTATE"):
        return None
    rest = message[len("EMQSTATE") :].strip()
    for prefix, cls, note in _EMQSTATE:
        if rest.startswith(prefix):
            return cls, note.format(rest=rest[len(prefix) :].strip())
    return Refused, rest
