"""The transfer verbs: `export` (a set's jobs to a file, a read), `import` (a file's jobs
into a queue) and `move` (jobs to another queue, each exactly once: a quarantine).

`import` and `move` print what they would act on first; above `confirm_above` jobs they
act only with `--yes` (the one confirmation gate), and `--dry-run` answers what they
would do and writes nothing. A filtered move (`--error GLOB`) moves exactly the jobs
of the preview it printed.
"""

from __future__ import annotations

import contextlib
from argparse import Namespace
from collections.abc import Callable, Iterator
from typing import Any

from .. import admin, transfer, triage
from ..errors import BadInput, EMQError, UsageProblem
from ..grammar import whole_arg
from ..keyspace import queue_key
from ..registry import opt, verb
from .bulk import preview
from .session import BUDGET, DRY_RUN, ERROR, QUEUE, YES, Session, budget_of, confirm

# a progress line a shell prints at most this many times over a run
REPORTS = 20


class _Paced:
    """A transfer's `progress(calls, done)` that calls `report(done)` at most `REPORTS`
    times over `total` jobs, so a million jobs print 20 lines, not 2,000; `end()` says the
    total once, unless said last."""

    def __init__(self, report: Callable[[int], None], total: int):
        self.report, self.total = report, total
        self.step, self.said = max(1, total // REPORTS), -total

    def __call__(self, calls: int, done: int) -> None:
        if done - self.said >= self.step:
            self.said = done
            self.report(done)

    def end(self) -> None:
        if self.said != self.total:
            self.report(self.total)


@contextlib.contextmanager
def _file(doing: str, path: str) -> Iterator[None]:
    """A file the verb cannot open (no such file or directory, no permission): `BadInput`,
    one line naming it, where a raw OSError ended a notebook cell in a traceback."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, EMQError):  # a WireError is a ConnectionError
            raise
        raise BadInput(f"cannot {doing} {path}: {exc.strerror or exc}") from None


@verb(
    "export",
    "write a set's jobs to a file: .jsonl, .jsonl.gz or .parquet (a read)",
    QUEUE,
    opt("--state", choices=["dead", "pending", "schedule", "active"], default="dead"),
    ERROR,
    opt("--limit", type=whole_arg, help="at most N jobs, in set order"),
    opt("--to", metavar="PATH", required=True, help="the file; its suffix says the format"),
)
def _export(s: Session, ns: Namespace) -> None:
    q = ns.queue
    transfer.suffix_of(ns.to)
    total = admin._count(s.conn, q, (ns.state,))
    if ns.limit is not None:
        total = min(total, ns.limit)
    paced = _Paced(s.progress(f"export {q}", total), total)
    with _file("write", ns.to):
        n = transfer.export_jobs(
            s.conn,
            q,
            ns.to,
            state=ns.state,
            error=ns.error,
            limit=ns.limit,
            progress=paced,
            budget=s.settings.budget,
        )
    paced.end()
    s.say(f"exported {n:,} {ns.state} jobs of {q} to {n.path}")
    for line in n.lines():
        s.say(f"  {line}")


@verb(
    "import",
    "add the jobs of an export file to a queue; ids it holds are skipped",
    QUEUE,
    opt("--from", metavar="PATH", required=True, help="a .jsonl, .jsonl.gz or .parquet export"),
    opt("--state", choices=list(transfer.IMPORT_STATES), default="pending"),
    DRY_RUN,
    YES,
    writes=True,
)
def _import(s: Session, ns: Namespace) -> transfer.Imported:
    q, path = ns.queue, getattr(ns, "from")
    with _file("read", path):
        checked = transfer.check_file(path)
    s.say(f"import {q}: {checked.count:,} records in {path} ({checked.digest[:23]}…), all valid")
    if ns.dry_run:
        would = transfer.import_jobs(s.conn, q, path, state=ns.state, dry_run=True)
        s.say(f"dry run, nothing written: would add {would.added:,}, skip {would.skipped:,} (ids held)")
        return would
    confirm(s, ns, checked.count, "import")
    paced = _Paced(s.progress(f"import {q}", checked.count), checked.count)
    done = transfer.import_file(s.conn, q, path, state=ns.state, digest=checked.digest, progress=paced)
    paced.end()
    s.say(f"imported into {q}: {done.added:,} added, {done.skipped:,} skipped (ids held already)")
    return done


@verb(
    "move",
    "move jobs to another queue, each exactly once (a quarantine)",
    QUEUE,
    opt("--to", metavar="QUEUE", help="the target queue (a new one is created paused)"),
    opt("--state", choices=list(transfer.MOVE_STATES), default="dead"),
    ERROR,
    opt("--ids", metavar="ID,ID", action="append", help="these jobs (repeat it, or commas)"),
    opt("--limit", type=whole_arg, help="at most N jobs, in set order"),
    opt("--no-pause", action="store_true", help="a new target is not paused"),
    opt("--finish", action="store_true", help="only finish the moves an earlier call left part way"),
    opt("--take-over", action="store_true", help="finish another client's batches now (it is gone)"),
    BUDGET,
    DRY_RUN,
    YES,
    writes=True,
)
def _move(s: Session, ns: Namespace) -> transfer.MoveResult:
    q = ns.queue
    budget = budget_of(s, ns, most=transfer.ID_BUDGET)
    if ns.finish:
        if ns.to is not None or ns.error is not None or ns.ids or ns.dry_run:
            raise UsageProblem(
                f"move --finish takes no target, filter or --dry-run — see {s.front.command} move --help"
            )
        done = transfer.finish_moves(s.conn, q, take_over=ns.take_over, budget=budget)
        s.say(f"move {q} --finish: {done.moved:,} jobs of earlier moves finished")
        _lines(s, done)
        return done
    if ns.to is None:
        raise UsageProblem(f"move takes --to QUEUE (or --finish) — see {s.front.command} move --help")
    transfer.check_move(q, ns.to, ns.state)
    if ns.error is not None and ns.ids:
        raise UsageProblem("move takes --ids or --error, not both")
    ids = None if not ns.ids else [i for word in ns.ids for i in word.split(",") if i]
    if ns.error is not None:
        found = triage.find(s.conn, q, state=ns.state, error=ns.error, limit=None, budget=s.settings.budget)
        ids = preview(s, "move", q, found, ns.limit)
        count = len(ids)
    elif ids is not None:
        ids = ids[: ns.limit]
        count = len(ids)
        s.say(f"move {q}: {count:,} jobs named")
    else:
        count = admin._count(s.conn, q, (ns.state,))
        if ns.limit is not None:
            count = min(count, ns.limit)
        s.say(f"move {q}: {count:,} {ns.state} jobs")
    options: dict[str, Any] = {"state": ns.state, "ids": ids, "budget": budget}
    if ids is None:
        options["limit"] = ns.limit
    if ns.dry_run:
        would = transfer.move_jobs(s.conn, q, ns.to, dry_run=True, **options)
        s.say(f"dry run, nothing written: would move {would.moved:,} to {ns.to}")
        _lines(s, would)
        return would
    confirm(s, ns, count, "move")
    paced = _Paced(s.progress(f"move {q}", count), count)
    done = transfer.move_jobs(
        s.conn,
        q,
        ns.to,
        pause=not ns.no_pause,
        take_over=ns.take_over,
        progress=paced,
        **options,
    )
    paced.end()
    paused = " (paused)" if s.conn.command("HEXISTS", queue_key(ns.to, "meta"), "paused") else ""
    s.say(f"moved {done.moved:,} jobs of {q} to {ns.to}{paused}")
    _lines(s, done)
    return done


def _lines(s: Session, result: transfer.MoveResult) -> None:
    for line in result.lines():
        s.say(f"  {line}")
