"""Runbooks for a real incident: the opening cell, previewed steps, the closing check.

A runbook (`notebooks/runbooks/`) runs against the live server, in Jupyter or papermill:

- `start(...)` connects (read-only unless `APPLY`) and prints the head of the incident
  record: runbook, redacted server label, env, executor, queue, parameters, UTC time.
- `Runbook.step(name, preview, apply, precheck)` shows what a writing step would do (a
  `Preview`). With `APPLY = True` it runs `precheck()` first and raises
  `PreconditionFailed` before writing when the precondition no longer holds; then
  `apply()`.
- `Runbook.glance(plot)`: the health verdict and why, and a throughput or latency plot.
- `Runbook.verify(outcome)`: the last cell; with `APPLY = True` a check that fails
  raises `OutcomeNotReached`.

The only writes are the steps' `apply` calls. The readers below and the paced,
trial-first reprocess of chosen dead jobs are shared by the runbooks.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import audit, frames, health, lanes, moves, plots, repeat, triage
from .connector import Connection, connect
from .decoding import text_dtype, visible
from .defaults import DEFAULT_BUDGET
from .errors import BadInput, Halted, OutcomeNotReached, PreconditionFailed
from .keyspace import check_name, job_key, queue_key
from .redaction import redact, secrets_of

SAMPLE = 5


def _clock() -> str:
    return time.strftime("%H:%M:%SZ", time.gmtime())


def _show(value: Any) -> None:
    """Display a frame (or anything) in the notebook's output; print it elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is a dependency
        print(value)
        return
    if get_ipython() is None:
        print(visible(value.to_string() if isinstance(value, pd.DataFrame) else value))
    else:
        display(value)


@dataclass
class Preview:
    """What a writing step would do: one line, how many jobs, a few of their ids, and
    any other facts (what survives it). `needed=False`: the step has nothing to do."""

    what: str
    count: int = 0
    sample: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    needed: bool | None = None

    def __post_init__(self) -> None:
        if self.needed is None:
            self.needed = self.count > 0

    def lines(self) -> list[str]:
        out = [self.what]
        if self.sample:
            more = f" (and {self.count - len(self.sample):,} more)" if self.count > len(self.sample) else ""
            out.append(f"  sample ids: {', '.join(visible(s) for s in self.sample)}{more}")
        out += [f"  {k}: {visible(v)}" for k, v in self.facts.items()]
        return out

    def __repr__(self) -> str:
        return "\n".join(self.lines())


def need(condition: bool, why: str) -> str | None:
    """A precheck's answer: None when `condition` holds, else the reason it does not."""
    return None if condition else why


class Runbook:
    """One run of a runbook: its connection, its queue, APPLY, and the record of its steps."""

    def __init__(self, name: str, conn: Connection, queue: str, apply: bool, params: dict[str, Any]):
        self.name, self.conn, self.queue, self.apply, self.params = name, conn, queue, apply, params
        self.steps: list[dict[str, Any]] = []
        self.started = time.time()
        # by the server's clock, as the audit entries are stamped
        self.started_ms = conn.server_ms()

    def say(self, line: str) -> None:
        print(f"[{_clock()}] {visible(line)}")

    # -- the steps ------------------------------------------------------------------
    def step(
        self,
        name: str,
        preview: Preview,
        apply: Callable[[], Any],
        precheck: Callable[[], str | None] | None = None,
    ) -> Any:
        """Show `preview`; with APPLY, re-check the precondition and do the step.

        Not needed (`preview.needed` false): nothing happens. APPLY = False: the preview
        only. APPLY = True: `precheck()` (None: it holds; a text: why not) runs on the
        live server first; a failed precondition raises `PreconditionFailed` before
        `apply()` writes anything. The step is a `runbook` surface: every write it makes
        is recorded, the queue underneath and a worker's housekeeping included."""
        lines = preview.lines()
        if not preview.needed:
            self.say(f"step {name}: not needed — {lines[0]}")
            return self._log(name, "not needed", preview, "nothing to do")
        self.say(f"step {name}: {lines[0]}")
        for line in lines[1:]:
            print(line)
        if not self.apply:
            self._log(name, "previewed", preview, "")
            print("  APPLY = False: previewed only, nothing written")
            return None
        why = precheck() if precheck is not None else None
        if why:
            self._log(name, "stopped", preview, why)
            raise PreconditionFailed(f"step {name} stopped before writing anything: {why}")
        # the operator's step: its writes are recorded as typed (lease expiry and the
        # due promotion included), and an entry not written ends its line
        with audit.surface("runbook") as recorded:
            result = apply()
        said = result if isinstance(result, str) else repr(result)
        self._log(name, "done", preview, said)
        self.say(f"step {name}: done — {said}{recorded.suffix()}")
        return result

    def _log(self, name: str, outcome: str, preview: Preview, result: str) -> None:
        self.steps.append(
            {
                "step": name,
                "outcome": outcome,
                "what": preview.what,
                "count": preview.count,
                "result": result,
                "at": _clock(),
            }
        )

    def progress(self, label: str, total: int, left: bool = False) -> Callable[[int, int], None]:
        """A progress callback for a bounded loop, `(calls, n)`: n is the work done so far
        (or, with `left=True`, what is left, as `obliterate_all` reports). It moves a
        progress bar in a notebook and prints a line at each quarter, for the record."""
        bar = _bar(label, total)
        said = [-1]

        def report(calls: int, n: int) -> None:
            done = max(0, total - n) if left else n
            if bar is not None:
                bar.value = min(done, bar.max)
            quarter = 4 if total <= 0 else min(4, done * 4 // total)
            if quarter > said[0]:
                said[0] = quarter
                self.say(f"{label}: call {calls}, {done:,} of {total:,}")

        return report

    # -- the closing check -------------------------------------------------------------
    def verify(self, outcome: dict[str, Callable[[], bool]]) -> pd.DataFrame:
        """The last cell. APPLY = True: each check must hold, else `OutcomeNotReached`.
        APPLY = False: the checks are shown as they stand (the session was read-only,
        so nothing was written) and the notebook passes."""
        held = {what: bool(check()) for what, check in outcome.items()}
        for what, ok in held.items():
            print(f"  {'✓' if ok else '✗'} {what}")
        record = self.record()
        _show(record)
        self.audit()
        if not self.apply:
            assert self.conn.read_only
            self.say(
                f"APPLY = False: a read-only session, nothing written; {sum(held.values())} of "
                f"{len(held)} outcomes hold now. Set APPLY = True and run all to apply."
            )
            return record
        missing = [what for what, ok in held.items() if not ok]
        if missing:
            raise OutcomeNotReached(f"{self.name} on {self.queue}: not reached: {'; '.join(missing)}")
        self.say(f"{self.name} on {self.queue}: outcome reached ({len(held)} checks)")
        return record

    def audit(self) -> pd.DataFrame:
        """The audit entries this run wrote (`audit.read`: its queue's stream, and those
        of the queues it wrote to), newest first; printed and returned. A run with
        APPLY = False wrote none: it says so."""
        since = max(1, self.conn.server_ms() - self.started_ms + 1000)
        mine = audit.notebook()
        frames_ = [audit.read(self.conn, q, since_ms=since) for q in audit.written(self.conn, self.queue)]
        entries = pd.concat(frames_) if frames_ else audit.read(self.conn, self.queue, since_ms=since)
        at = entries.entry.map(lambda e: audit.entry_order(e)[0])
        entries = entries[(entries.notebook == mine) & (at >= self.started_ms)]
        entries = entries.sort_values("entry", key=lambda e: e.map(audit.entry_order), ascending=False)
        if entries.empty:
            self.say(
                "audit: this run wrote no entry" + ("" if self.apply else " (APPLY = False: nothing written)")
            )
        else:
            self.say(f"audit: the {len(entries)} entries this run wrote (emq:audit:{{q}})")
            _show(entries[["time", "queue", "verb", "outcome", "count", "who", "reason", "args"]])
        return entries.reset_index(drop=True)

    def record(self) -> pd.DataFrame:
        """Every step of this run: outcome (not needed, previewed, done, stopped), what, when."""
        cols = ["step", "outcome", "what", "count", "result", "at"]
        return pd.DataFrame.from_records(self.steps, columns=cols)

    # -- what the queue looks like --------------------------------------------------------
    def status(self) -> pd.DataFrame:
        """The queue's counts, paused flag and health verdict (`frames.health`); shown
        and returned."""
        frame = frames.health(self.conn, [self.queue])
        _show(frame)
        return frame

    def glance(self, plot: str = "throughput", since: str = "1h") -> pd.DataFrame:
        """The queue's health verdict and why, printed with the time (they are part of
        the incident record, kept as text), then its `plot` over the last `since`:
        "throughput" (claimed, completed and failed per minute) or "latency" (wait and
        run percentiles). The figure is shown once, as an image, and not returned (a
        returned figure would show twice). Reads only: `frames.health` and the plot read
        the counts, metrics and histograms, and write nothing. Answers the health frame."""
        draw = {"throughput": plots.throughput, "latency": plots.latency}.get(plot)
        if draw is None:
            raise BadInput(f"plot is 'throughput' or 'latency', not {plot!r}")
        frame = frames.health(self.conn, [self.queue])
        for line in health.verdict_lines(frame):
            self.say(f"health: {line}")
        fig = draw(self.conn, self.queue, since=since)
        plots.show_in_notebook()
        _show(fig)
        return frame


def _bar(label: str, total: int) -> Any:
    try:
        import ipywidgets as w
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    if get_ipython() is None or getattr(get_ipython(), "kernel", None) is None:
        return None
    bar = w.IntProgress(value=0, min=0, max=max(total, 1), description=label[:20])
    _show(bar)
    return bar


PASSWORD_VARIABLE = "EMQ_PASSWORD"


def _password(url: str | None) -> dict[str, Any]:
    """`{"password": ...}` from `EMQ_PASSWORD` when the server's URL carries none (else
    nothing); `BadInput` when the URL parameter carries one (the record would keep it)."""
    if url is not None and secrets_of(url):
        raise BadInput(
            f"EMQ_URL holds a password, and the executed notebook (the incident record) keeps "
            f"every parameter: give EMQ_URL without it ({redact(url)}) and put the password "
            f"in the {PASSWORD_VARIABLE} environment variable"
        )
    password = os.environ.get(PASSWORD_VARIABLE) or None
    server = url if url is not None else os.environ.get("EMQ_URL") or None
    if password is None or server is None or secrets_of(server):
        return {}
    return {"password": password}


def start(
    name: str,
    url: str | None,
    queue: str,
    apply: bool,
    *,
    env: str | None = None,
    executor: str = "script",
    reason: str | None = None,
    **params: Any,
) -> Runbook:
    """The connect cell: connect (read-only unless `apply`), print the record's head.

    `url` None is `EMQ_URL`, else the embedded default; the password comes from
    `EMQ_PASSWORD`. Refused (`BadInput`, before any I/O): an `url` carrying a password
    (papermill writes every parameter into the executed notebook), and a queue with no
    key unless `absent_ok=True` (a typo in QUEUE must not pass as a healthy queue).
    Every audit entry of the run says surface `runbook`, the runbook and its parameters,
    and `reason` (the `REASON` parameter)."""
    if not isinstance(apply, bool):
        raise BadInput(f"APPLY is True or False, not {apply!r}")
    check_name(queue)
    absent_ok = bool(params.pop("absent_ok", False))
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise BadInput(f"REASON is a line of text or None, not {reason!r}")
    audit.runbook(name, {"QUEUE": queue, "APPLY": apply, "REASON": reason, **params})
    conn = connect(url, read_only=not apply, env=env, executor=executor, name="runbook", **_password(url))
    conn.reason = reason
    # the record is read as text (a saved notebook, papermill's output): wide frames, one line a row
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 60)
    print(
        f"runbook {name} · started {time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())}"
        f" · reason: {visible(reason) if reason else 'none given (REASON)'}"
    )
    mode = "APPLY = True: steps write" if apply else "APPLY = False: preview only, a read-only session"
    print(f"server: {conn.label} · env {env or 'not set'} · executor {conn.executor} · {mode}")
    knobs = ", ".join(f"{k}={v!r}" for k, v in params.items())
    print(f"queue: {queue}" + (f" · parameters: {knobs}" if knobs else ""))
    if conn.in_process:
        print(
            "note: the embedded default is an empty in-process server; set EMQ_URL (or the "
            "EMQ_URL parameter) to reach the live one"
        )
    if not absent_ok and not _has_keys(conn, queue):
        known = ", ".join(frames.queues(conn)[:20]) or "none"
        raise BadInput(f"no queue {queue!r} on {conn.label} (queues there: {known})")
    try:
        from .magics import SESSION

        SESSION.add(conn)  # `%emq ...` in this notebook uses it too
    except ImportError:  # pragma: no cover
        pass
    return Runbook(name, conn, queue, apply, {"QUEUE": queue, "APPLY": apply, **params})


# the keys one of which every queue holds while it holds anything: its meta hash (every
# transition writes it), its sets, its lanes' names, its repeatables and dedup keys
_QUEUE_KEYS = ("meta", "pending", "active", "schedule", "dead", "groups", "repeat", "repeat:defs", "dedup")


def _has_keys(conn: Connection, q: str) -> bool:
    """True when queue `q` has a key on the server: one EXISTS of its own keys (one
    slot), never a SCAN of the keyspace, whose cost grows with every key anyone stores."""
    return bool(conn.command("EXISTS", *(queue_key(q, k) for k in _QUEUE_KEYS)))


# -- readers the runbooks share ----------------------------------------------------------


def members(
    conn: Connection, q: str, state: str, max_score: float | None = None, n: int = SAMPLE
) -> tuple[int, list[str]]:
    """(count, first `n` ids) of a state set, up to `max_score` (a time) when given: the
    ids read a chunk at a time within a byte budget (`frames.members_page`)."""
    key = queue_key(q, state)
    if max_score is None:
        count = int(conn.command("ZCARD", key))
    else:
        count = int(conn.command("ZCOUNT", key, "-inf", max_score))
    # the set is ordered by score: those up to max_score hold its first `count` ranks
    return count, frames.members_page(conn, key, 0, min(n, count))[0] if count else []


def expired_leases(conn: Connection, q: str, now: int | None = None) -> tuple[int, list[str]]:
    """In-flight jobs whose lease deadline has passed: (count, sample ids)."""
    return members(conn, q, "active", conn.server_ms() if now is None else now)


def overdue(conn: Connection, q: str, now: int | None = None) -> tuple[int, list[str]]:
    """Scheduled jobs already due (a promotion would make them ready): (count, sample ids)."""
    return members(conn, q, "schedule", conn.server_ms() if now is None else now)


def lane_frame(conn: Connection, q: str) -> pd.DataFrame:
    """One row per lane: pending, active, limit, paused, and its share of the in-flight jobs.
    Every lane, read in bounded calls (`lanes.lanes` with no limit): an incident's read. A
    count a lane's meta holds no whole number for (another node wrote it) is <NA>."""
    known = lanes.lanes(conn, q, limit=None)
    cols = ["pending", "active", "limit", "paused"]
    frame = pd.DataFrame(
        [[known[g][c] for c in cols] for g in known], index=pd.Index(list(known), name="group"), columns=cols
    )
    frame = frame.astype(
        {c: "int64" if frame[c].notna().all() else "Int64" for c in cols[:3]} | {"paused": "bool"}
    )
    total = int(frame["active"].sum()) if len(frame) else 0
    frame["active_share"] = (frame["active"] / total).round(2) if total else 0.0
    return frame


def repeatables(conn: Connection, q: str) -> list[str]:
    """The names of the queue's registered repeatables."""
    return [r["name"] for r in repeat.registered(conn, q)]


def gone(conn: Connection, q: str, ids: Iterable[str]) -> list[str]:
    """The ids whose row no longer exists."""
    ids = list(ids)
    pipe = conn.pipeline()
    for i in ids:
        pipe.exists(job_key(q, i))
    return [i for i, there in zip(ids, pipe.execute(), strict=True) if not there]


def in_dead(conn: Connection, q: str, ids: Iterable[str]) -> list[str]:
    """The ids that are members of the dead set."""
    ids = list(ids)
    pipe = conn.pipeline()
    for i in ids:
        pipe.zscore(queue_key(q, "dead"), i)
    return [i for i, s in zip(ids, pipe.execute(), strict=True) if s is not None]


# -- dead letters (emq_notebook.triage finds and groups them) -----------------------------------


def choose(dead: pd.DataFrame, pattern: str | None) -> pd.DataFrame:
    """The rows of `dead` (a `triage.find` frame) whose error signature
    (`triage.signature`) matches glob `pattern` (fnmatch, case-sensitive), with a
    `signature` column; no rows when `pattern` is None."""
    sigs = [triage.signature(e) if isinstance(e, str) else "" for e in dead["last_error"]]
    dead = dead.assign(signature=pd.Series(sigs, index=dead.index, dtype=text_dtype(sigs)))
    if not pattern:
        return dead.iloc[0:0]
    matches = [fnmatch.fnmatchcase(s, pattern) for s in dead["signature"]]
    mask = pd.Series(matches, index=dead.index, dtype=bool)
    return dead.loc[mask]


def reprocess_words(conn: Connection, q: str, ids: list[str], dry_run: bool = False) -> dict[str, str]:
    """{id: "reprocessed" | "gone" | "not_dead"}: `moves.reprocess_jobs` (a dry run is
    computed by the server and writes nothing)."""
    return dict(moves.reprocess_jobs(conn, q, ids, dry_run=dry_run))


def reprocess_chosen(
    conn: Connection,
    q: str,
    ids: list[str],
    *,
    rate: float | None = None,
    trial: int | None = None,
    stop_if_failing: float | None = None,
    watch_s: float = 30,
    say: Callable[[str], None] = print,
) -> dict[str, str]:
    """Move the chosen dead jobs back, a trial batch first, then at most `rate` a second.

    The trial (`trial` jobs) is watched for at most `watch_s` seconds: when at least
    `stop_if_failing` (a fraction) of them are dead again it stops and raises `Halted`
    (`moved`, `failed_again`); the rest are not touched. Answers `{id: word}`."""
    if rate is not None and not rate > 0:
        raise BadInput(f"RATE is jobs per second (> 0) or None, not {rate!r}")
    if stop_if_failing is not None and not 0 < stop_if_failing <= 1:
        raise BadInput(f"STOP_IF_FAILING is a fraction in (0, 1] or None, not {stop_if_failing!r}")
    words: dict[str, str] = {}
    first = ids[:trial] if trial else []
    if first:
        words.update(reprocess_words(conn, q, first))
        moved = [i for i in first if words[i] == "reprocessed"]
        failed = _watch(conn, q, moved, watch_s)
        say(f"trial: {len(moved)} moved, {len(failed)} dead again after watching")
        if stop_if_failing is not None and moved and len(failed) / len(moved) >= stop_if_failing:
            raise Halted(
                f"trial on {q}: {len(failed)} of {len(moved)} dead again "
                f"(stop at {stop_if_failing:.0%}); {len(ids) - len(first)} not moved",
                moved=len(moved),
                failed_again=len(failed),
            )
    rest = ids[len(first) :]
    batch = max(1, int(rate)) if rate else DEFAULT_BUDGET
    for start in range(0, len(rest), batch):
        began = time.monotonic()
        words.update(reprocess_words(conn, q, rest[start : start + batch]))
        if rate and start + batch < len(rest):
            time.sleep(max(0.0, batch / rate - (time.monotonic() - began)))
    return words


def _watch(conn: Connection, q: str, moved: list[str], watch_s: float) -> list[str]:
    """Wait (at most `watch_s`) until every moved job is finished (row gone) or dead again;
    answers the ones dead again."""
    deadline = time.monotonic() + watch_s
    while True:
        dead, finished = set(in_dead(conn, q, moved)), set(gone(conn, q, moved))
        if len(dead | finished) == len(moved) or time.monotonic() >= deadline:
            return [i for i in moved if i in dead]
        time.sleep(0.2)
