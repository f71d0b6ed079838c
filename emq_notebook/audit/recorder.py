"""The recorder: one path writes every entry (`audited`, `recorded`), beside the
transition it records, with what came of it."""

from __future__ import annotations

import contextvars
import functools
import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from ..checks import whole
from ..connector import carrying
from ..errors import EMQError, Halted, InvalidName, ended_after
from ..keyspace import audit_key
from .context import _surface, in_surface
from .entry import (
    KEEP,
    MAX_ARG,
    STARTED,
    _doing,
    _one_line,
    _unsent,
    ids_field,
    options,
    outcome_of,
    storable,
    touched,
)
from .identities import _who_values, identity
from .reading import _written, _written_lock

if TYPE_CHECKING:
    from ..connector import Connection

F = TypeVar("F", bound=Callable[..., Any])


# the queue underneath and a worker's housekeeping (lease expiry, the due promotion):
# recorded when an operator typed or clicked them (inside a `surface` block: a magic,
# the shell, a panel, a runbook's step), never when a worker or a producer calls them
UNDERNEATH = frozenset({"enqueue", "claim", "complete", "fail", "expire", "promote-due"})


class AuditNotWritten(UserWarning):
    """A verb ran but its audit entry could not be written (outside a surface block)."""


_open: contextvars.ContextVar[Record | None] = contextvars.ContextVar("emq_audit_open", default=None)

# -- the recorder --------------------------------------------------------------------------------


class Record:
    """One writing call being recorded, a context manager (`recorded` at the call site):

        with audit.recorded(conn, "pause", q) as rec:
            rec.result = admin.pause(conn, q)

    `args` are the options given, `job` the one job a per-job verb addresses, `keep`
    the entries kept (`conn.audit_keep`, else `KEEP`), `counts(result, job)` reads
    count and ids from `.result` (`touched`). On leaving, the entry is written (unless
    `.active` is False: a dry run, a read-only session, a nested record); `.entry`
    holds its stream id, `.failed` the `audit_failed` note when it was not written.

    A `bulk` verb writes a `started` entry before its first writing call (`start`) and
    says after each call the jobs it changed (`add`); its closing entry says their sum
    whatever the outcome and names the `started` entry, and the exception that ended it
    carries the count (`errors.ended_after`). It implements `connector.Carried`.
    """

    # class defaults: a record is made on every write, and most of these never change
    result: Any = None
    entry: Any = None
    failed: str | None = None
    active = False
    # as the transition's own call carries the entry (`within`, `connector.Carried`): the stream's
    # key, named once the gate has passed the queue's name (`_records`)
    key = ""
    sent = False
    failure: str | None = None
    # the entry went (or did not) with the transition, in its call (`within`)
    settled = False
    # the connection's writing transitions sent before the call (`_unsent`)
    _writes_before = 0
    # a bulk verb's: the jobs its calls changed, and their ids (None: it said none, `add`)
    changed: int | None = None
    changed_ids: list[str] | None = None
    # its `started` entry's stream id, once written (`start`)
    began: str | None = None
    _token: contextvars.Token[Record | None] | None = None

    def __init__(
        self,
        conn: Connection,
        verb: str,
        queue: str,
        *,
        args: Mapping[str, Any] | None = None,
        job: str | None = None,
        dry_run: bool = False,
        keep: int | None = None,
        counts: Callable[[Any, str | None], tuple[int, list[str]]] = touched,
        bulk: bool = False,
    ):
        self.conn, self.verb, self.queue, self.args, self.job = conn, verb, queue, args, job
        self.dry_run, self.counts, self.keep, self.bulk = dry_run, counts, keep, bulk

    def add(self, count: int, ids: Iterable[str] = ()) -> None:
        """Say the jobs one call of a bulk verb changed (after each call): the closing
        entry's count is their sum, whatever ends the verb."""
        self.changed = (self.changed or 0) + int(count)
        self.changed_ids = [*(self.changed_ids or ()), *map(str, ids)]

    def start(self) -> None:
        """Write the entry saying a bulk verb started (outcome `started`), once, before its
        first writing call: a client killed before its closing entry leaves this one.
        One that cannot be written stops nothing (the closing entry notes its own failure)."""
        if not self.active or self.began is not None:
            return
        self.began, self.changed = "", self.changed or 0
        try:
            self.began = append(self.conn, self.queue, self.fields(None, outcome=STARTED), self.kept())
            self._noted()
        except Exception:
            pass

    def _records(self) -> bool:
        if self.dry_run or self.conn.read_only or within_open(self.conn, self.verb, self.queue):
            return False
        try:
            self.key = audit_key(self.queue)
        except InvalidName:
            return False
        return True

    def __enter__(self) -> Record:
        self.active = self._records()
        if self.active:
            self._writes_before = getattr(self.conn, "writes_sent", 0)
            self._token = _open.set(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        if self.active:
            self._close(exc, stacklevel=4)
        return False

    def _close(self, exc: BaseException | None, stacklevel: int) -> None:
        """The record's end, for a call that ended with `exc` (None: it answered): the
        entry written unless its transition carried it (`settled`) or nothing was sent
        (`_unsent`, and no `started` entry either: a start is always closed), and its
        stream id or `audit_failed` note handed to the surface block, the exception or a
        warning (`stacklevel`: the verb's caller)."""
        assert self._token is not None
        _open.reset(self._token)
        unsent = getattr(self.conn, "writes_sent", 0) == self._writes_before
        if exc is not None and _unsent(exc) and unsent and self.began is None:
            return  # refused as malformed before anything was written, its start included
        if exc is not None and self.changed is not None:
            ended_after(exc, self.changed, _doing(self.verb))
        try:
            if not self.settled:
                self.entry = self.write(exc)
        except Exception as fault:
            self.failed = f"audit_failed: {self.verb} {self.queue} not recorded ({_one_line(fault)})"
        said = _surface.get()
        if said is not None:
            if self.entry is not None:
                said.entries.append((self.queue, self.entry))
            if self.failed:
                said.failed.append(self.failed)
        if self.failed:
            if exc is not None:
                exc.add_note(self.failed)
            elif said is None:
                warnings.warn(self.failed, AuditNotWritten, stacklevel=stacklevel)

    def fields(self, exc: BaseException | None, outcome: str | None = None) -> dict[str, str]:
        """The entry's fields for a call that ended with `exc` (None: it answered), or
        of the `started` entry (`outcome`)."""
        outcome = outcome or outcome_of(exc)
        count: int | None
        if outcome == STARTED:
            count, ids = None, []
        elif self.changed is not None:  # a bulk verb: what its calls changed, whatever ended it
            count, ids = self.changed, self.changed_ids or []
        elif outcome == "done":
            count, ids = self.counts(self.result, self.job)
        elif isinstance(exc, Halted):
            count, ids = exc.moved, []
        else:
            # refused: nothing touched; cut or failed: how much ran is not known
            count = 0 if outcome.startswith("refused") else None
            ids = [self.job] if self.job else []
        said = {
            "verb": self.verb,
            "outcome": outcome,
            "count": "" if count is None else str(count),
            "ids": ids_field(ids),
            "args": options(self.conn, self.args),
            **identity(self.conn),
        }
        if self.began and outcome != STARTED:
            said[STARTED] = self.began  # the entry this one closes
        return said

    def kept(self) -> int:
        return whole(
            self.keep if self.keep is not None else getattr(self.conn, "audit_keep", KEEP), "audit_keep"
        )

    def write(self, exc: BaseException | None) -> str:
        """XADD the entry; answers its stream id. A wire fault raises `WireError`."""
        entry = append(self.conn, self.queue, self.fields(exc), self.kept())
        self._noted()
        return entry

    def _noted(self) -> None:
        if self.queue in _written.get(self.conn.label, ()):
            return
        with _written_lock:
            _written.setdefault(self.conn.label, set()).add(self.queue)

    def within(self, call: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        """Run `call(*a, **kw)`, a verb of one transition, whose own call writes the entry
        (`connector.carrying`: its audited twin, no second round trip), so the entry is
        there exactly when the transition ran, even when the reply is then lost. A verb
        that raises before its transition goes out, or whose transition has no twin (a
        native command), leaves the record to `write`, after."""
        if not self.active:
            return call(*a, **kw)
        try:
            self.result = carrying(self, call, *a, **kw)
        finally:
            self._settle()
        return self.result

    def carried(self, call: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        """`with self: return self.within(call, *a, **kw)` in one frame: the path of every
        call of a `single` verb (`audited`)."""
        self.__enter__()
        if not self.active:
            return call(*a, **kw)
        try:
            self.result = carrying(self, call, *a, **kw)
        except BaseException as exc:
            self._settle()
            self._close(exc, stacklevel=4)
            raise
        self._settle()
        self._close(None, stacklevel=4)
        return self.result

    def _settle(self) -> None:
        """After the call: when its transition carried the entry (`sent`), the entry is
        settled, its stream id kept, or the `audit_failed` note of why it is not there."""
        if self.sent:
            self.settled = True
            if self.entry:
                self.entry = str(self.entry)
                self._noted()
            else:
                self.entry = None
                if self.failure is not None:
                    why = str(self.failure)[:MAX_ARG]
                    self.failed = f"audit_failed: {self.verb} {self.queue} not recorded ({why})"

    def values(self, gone: bool) -> list[str]:
        """The entry as the audited twin takes it, last in its ARGV (`includes/audited.lua`):
        verb, the count when done, ids, args, keep, '1' when a -1 reply is Gone, then the
        identity's values in `AUDIT_WHO`'s order. The twin works out the outcome, and the
        count of a call not done."""
        count, ids = self.counts(None, self.job)
        said = (self.verb, str(count), ids_field(ids), options(self.conn, self.args), str(self.kept()))
        return [*map(storable, said), "1" if gone else "", *map(storable, _who_values(self.conn))]


def within_open(conn: Connection, verb: str, queue: str) -> bool:
    """True when a call of `verb` on `queue` is part of the record open around it: the
    same verb on the same queue of the same server (`obliterate_all`'s calls of
    `obliterate`). A write on another queue, or another verb, made inside it (a
    progress callback's) is recorded by itself."""
    rec = _open.get()
    return rec is not None and rec.queue == queue and rec.verb == verb and rec.conn.label == conn.label


def started() -> None:
    """The bulk verb being recorded is about to send its first writing call: its
    `started` entry goes now (`Record.start`; once). Outside a bulk verb's record:
    nothing."""
    rec = _open.get()
    if rec is not None and rec.bulk:
        rec.start()


def changed(count: int, ids: Iterable[str] = ()) -> None:
    """Say, after one call of the bulk verb being recorded, the jobs that call changed
    (`Record.add`): the closing entry and the exception that ends the verb say their
    sum. Outside a bulk verb's record: nothing."""
    rec = _open.get()
    if rec is not None and rec.bulk:
        rec.add(count, ids)


def append(conn: Connection, queue: str, fields: Mapping[str, str], keep: int = KEEP) -> str:
    """`XADD emq:audit:{q} MAXLEN ~ keep * field value ...`; answers the entry's id."""
    flat = [storable(part) for pair in fields.items() for part in pair]
    return str(conn.command("XADD", audit_key(queue), "MAXLEN", "~", keep, "*", *flat))


# the recorder as a call site reads it: `with audit.recorded(conn, verb, q) as rec:`
recorded = Record


def audited(
    verb: str,
    *,
    queue: str = "q",
    job: str | None = None,
    counts: Callable[[Any, str | None], tuple[int, list[str]]] = touched,
    single: bool = False,
    bulk: bool = False,
) -> Callable[[F], F]:
    """A decorator recording every call of a writing verb `fn(conn, q, ...)`, stacked
    under its `@catalogue.contract`:

        @audited("remove", job="job_id", single=True)
        def remove_job(conn, q, job_id, dedup=None): ...

    `queue` and `job` name the parameters holding the queue and the one job; the other
    arguments given are the record's `args`. Nothing is written for a true `dry_run`,
    a call queued on a `pipeline`, or a verb of the queue underneath (`UNDERNEATH`)
    outside a `surface` block. `single`: its one transition's own call writes the entry
    (`Record.within`). `bulk`: many calls, a `started` entry and a closing one
    (`started`, `changed`)."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)
        first = next(iter(signature.parameters))
        # the arguments given, by name: the parameters a call may fill by position, in order
        by_position = [
            p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        ]
        names = frozenset(signature.parameters)
        required = frozenset(p.name for p in signature.parameters.values() if p.default is p.empty)

        every_position = len(by_position)
        # a call giving at least the required parameters by position, no more than there
        # are, and nothing by name, binds them in order: where every parameter may be given
        # by position or by name, or only by name with a default (else never: -1)
        plain_kinds = all(
            p.kind is p.POSITIONAL_OR_KEYWORD or (p.kind is p.KEYWORD_ONLY and p.default is not p.empty)
            for p in signature.parameters.values()
        )
        least = len(required) if plain_kinds else -1
        # what is not the record's `args`: the connection, the queue, the one job
        not_args = frozenset({first, queue, job})

        def given(a: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
            """What `signature.bind(*a, **kw).arguments` answers, in one step for a call
            that fits (the usual one); `bind` itself otherwise (its TypeError included)."""
            if not kw and 0 <= least <= len(a) <= every_position:
                return dict(zip(by_position, a, strict=False))
            if len(a) <= every_position and names.issuperset(kw):
                bound = dict(zip(by_position, a, strict=False))
                if not kw.keys() & bound.keys() and required.issubset(bound.keys() | kw.keys()):
                    return {**bound, **kw}
            return dict(signature.bind(*a, **kw).arguments)

        underneath = verb in UNDERNEATH
        # a call of the connection, the queue and (a per-job verb) the job, by position
        # and nothing else, the usual one: its parts read straight from `a`
        bare_call = 3 if job is not None and by_position[:3] == [first, queue, job] else 2
        if by_position[:2] != [first, queue] or not 0 <= least <= bare_call:
            bare_call = 0

        @functools.wraps(fn)
        def run(*a: Any, **kw: Any) -> Any:
            if not kw and least <= len(a) <= bare_call:
                conn, q, named, extra = a[0], a[1], (a[2] if len(a) == 3 else None), None
            else:
                try:
                    bound = given(a, kw)
                except TypeError:
                    return fn(*a, **kw)  # let the verb raise its own TypeError
                if bound.get("pipeline") is not None:
                    return fn(*a, **kw)
                conn, q = bound[first], bound.get(queue)
                # the options given (none when only the connection, the queue and the job are)
                plain = len(bound) == 2 or (len(bound) == 3 and job in bound)
                extra = None if plain else {k: v for k, v in bound.items() if k not in not_args}
                named = bound.get(job) if job else None
            if (
                not isinstance(q, str)
                or getattr(conn, "read_only", True)
                or within_open(conn, verb, q)
                or (underneath and not in_surface())
            ):
                return fn(*a, **kw)
            rec = recorded(
                conn,
                verb,
                q,
                args=extra,
                job=named if isinstance(named, str) else None,
                dry_run=bool(extra and extra.get("dry_run")),
                counts=counts,
                bulk=bulk,
            )
            if single:
                return rec.carried(fn, *a, **kw)
            with rec:
                rec.result = fn(*a, **kw)
            return rec.result

        run.__audited__ = Recording(verb, single, bulk)  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return wrap


class Recording(NamedTuple):
    """How `audited` records a function's calls (`recording`)."""

    verb: str
    single: bool
    bulk: bool


def recording(fn: Callable[..., Any]) -> Recording | None:
    """How `fn` is recorded, or None when it is not `audited`."""
    return getattr(fn, "__audited__", None)


def failure_line(exc: BaseException) -> str:
    """The one line of an exception with its audit note, for a surface that prints errors
    as one line (`EMQError: ... · audit_failed: ...`)."""
    notes = [n for n in getattr(exc, "__notes__", ()) if str(n).startswith("audit_failed")]
    head = f"{type(exc).__name__}: {exc}" if isinstance(exc, EMQError) else _one_line(exc)
    return head + "".join(f" · {n}" for n in notes)
