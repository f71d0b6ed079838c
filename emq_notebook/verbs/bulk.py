"""The filtered and controlled forms of `reprocess` and `remove` (the verbs are in
`job.py`, which hands these forms here).

A filtered bulk verb (`reprocess QUEUE --error GLOB`, `remove QUEUE --error GLOB`)
first finds its jobs and prints the preview: the count by error signature and sample
ids.  `--limit N` keeps the first N matches (in set order) and the preview says "the
first N of M matches".  `--dry-run` then answers, per id, the word the real call
would give, from a read-only script, and writes nothing.  Above `confirm_above` jobs it acts only with
`--yes` (the one confirmation gate); when it acts, it acts on exactly the ids of the
preview it printed, so a job that arrived after the preview is not touched.
"""

from __future__ import annotations

from argparse import Namespace
from collections import Counter
from typing import Any

import pandas as pd

from .. import moves, triage
from ..decoding import one_line
from ..defaults import ID_BUDGET, MOVE_BUDGET
from ..errors import UsageProblem
from ..keyspace import queue_key
from .session import Session, budget_of, confirm, states

SAMPLES = 3  # sample ids a preview shows per signature


def filtered(ns: Namespace) -> bool:
    """True when a `reprocess` / `remove` line is one of the forms handled here."""
    return any(
        getattr(ns, name, None) not in (None, False)
        for name in ("error", "payload", "signature", "dry_run", "rate", "trial", "stop_if_failing")
    )


def preview(s: Session, doing: str, q: str, found: pd.DataFrame, limit: int | None = None) -> list[str]:
    """Print what a bulk verb would act on: the count by signature and sample ids; answer
    the ids.  With `limit`, only the first `limit` matches (in set order) are acted on,
    and the line says so: "the first 2 of 10 matches"."""
    total = len(found)
    if limit is not None and total > limit:
        found = found.iloc[:limit]
        s.say(f"{doing} {q}: the first {limit:,} of {total:,} matches (--limit {limit:,})")
    else:
        s.say(f"{doing} {q}: {total:,} jobs match")
    ids = list(found.index)
    # plain lists, never a pandas text column: a signature holding bytes that are not
    # UTF-8 is text Arrow refuses
    sigs = [triage.signature(t) if isinstance(t, str) else "" for t in found["last_error"]]
    by_sig: dict[str, list[str]] = {}
    for job_id, sig in zip(ids, sigs, strict=True):
        by_sig.setdefault(sig, []).append(job_id)
    for sig, members in sorted(by_sig.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        # an id or a signature another node wrote holding a newline forges no line
        sample = ", ".join(one_line(i) for i in members[:SAMPLES])
        more = ", …" if len(members) > SAMPLES else ""
        s.say(f"  {len(members):>6,}  {one_line(sig) or '(no error)'}  [{sample}{more}]")
    return ids


def _tally(words: dict[str, str]) -> str:
    return ", ".join(f"{n:,} {w}" for w, n in sorted(Counter(words.values()).items())) or "nothing"


def _find_for(s: Session, ns: Namespace, states: Any) -> pd.DataFrame:
    return triage.find(
        s.conn,
        ns.queue,
        state=states,
        error=ns.error,
        payload=ns.payload,
        signature=ns.signature,
        limit=None,
        budget=s.settings.budget,
    )


def _filter_given(ns: Namespace) -> bool:
    return ns.error is not None or ns.payload is not None or ns.signature is not None


def reprocess(s: Session, ns: Namespace) -> Any:
    """`reprocess QUEUE --error GLOB [--payload GLOB] [--limit N] [--dry-run | --yes]`, and
    `reprocess QUEUE --all [--rate R] [--trial N [--stop-if-failing F]] [--dry-run]`."""
    if ns.id is not None:
        raise UsageProblem(
            "reprocess takes a job id, or a filter (--error, --payload, --signature) or "
            f"--all — not both; {s.front.see('reprocess')}"
        )
    if (ns.trial is not None or ns.stop_if_failing is not None) and not ns.all_dead:
        raise UsageProblem(f"--trial and --stop-if-failing go with --all — {s.front.see('reprocess')}")
    if ns.all_dead and _filter_given(ns):
        raise UsageProblem("reprocess takes --all or a filter (--error, --payload, --signature), not both")
    if ns.all_dead:
        return _reprocess_all(s, ns)
    if not _filter_given(ns):
        raise UsageProblem(
            "reprocess takes a job id, a filter (--error, --payload, --signature) or --all "
            f"— {s.front.see('reprocess')}"
        )
    ids = preview(s, "reprocess", ns.queue, _find_for(s, ns, "dead"), ns.limit)
    if ns.dry_run:
        words = moves.reprocess_jobs(
            s.conn, ns.queue, ids, dry_run=True, budget=budget_of(s, ns, most=ID_BUDGET)
        )
        s.say(f"dry run, nothing written: would answer {_tally(words)}")
        return words
    confirm(s, ns, len(ids), "reprocess")
    report = s.progress(f"reprocess {ns.queue}", len(ids)) if ns.rate is not None else None
    words = moves.reprocess_jobs(
        s.conn,
        ns.queue,
        ids,
        budget=budget_of(s, ns, most=ID_BUDGET),
        rate=ns.rate,
        progress=None if report is None else lambda calls, n: report(n),
    )
    s.say(f"reprocess {ns.queue}: {_tally(words)} (the {len(ids):,} previewed jobs)")
    return words


def _reprocess_all(s: Session, ns: Namespace) -> Any:
    """`reprocess QUEUE --all`: the dry run answers what the real call would move, from
    the same walk in read-only steps (bad rows stay, ghosts are dropped, foreign ids
    stay), then the errors of the dead set; the real call says what it moved and left."""
    q = ns.queue
    dead = int(s.conn.command("ZCARD", queue_key(q, "dead")))
    if ns.dry_run:
        would = moves.reprocess_dead(
            s.conn, q, budget=budget_of(s, ns, most=MOVE_BUDGET), limit=ns.limit, dry_run=True
        )
        s.say(f"reprocess {q} --all: {would:,} of {dead:,} dead jobs would move; nothing written")
        for line in would.left(dry_run=True):
            s.say(f"  {line}")
        return triage.errors(s.conn, q, budget=s.settings.budget)
    total = dead if ns.limit is None else min(dead, ns.limit)
    confirm(s, ns, total, "reprocess")
    report = s.progress(f"reprocess {q}", total)
    n = moves.reprocess_dead(
        s.conn,
        q,
        budget=budget_of(s, ns, most=MOVE_BUDGET),
        limit=ns.limit,
        progress=lambda calls, moved: report(moved),
        rate=ns.rate,
        trial=ns.trial,
        stop_if_failing=ns.stop_if_failing,
        watch_s=ns.watch / 1000,
    )
    s.say(f"reprocessed {n} dead jobs of {q}")
    for line in n.left():
        s.say(f"  {line}")
    return None


def remove(s: Session, ns: Namespace) -> Any:
    """`remove QUEUE --error GLOB [--payload GLOB] [--state S] [--limit N] [--dry-run | --yes]`."""
    if ns.id is not None:
        raise UsageProblem("remove takes a job id or a filter (--error, --payload), not both")
    if not _filter_given(ns):
        raise UsageProblem(
            "remove takes a job id or a filter (--error GLOB, --payload GLOB, --signature "
            f"S) — {s.front.see('remove')}"
        )
    ids = preview(s, "remove", ns.queue, _find_for(s, ns, states(ns)), ns.limit)
    if ns.dry_run:
        words = moves.remove_jobs(s.conn, ns.queue, ids, dry_run=True)
        s.say(f"dry run, nothing written: would answer {_tally(words)}")
        return words
    confirm(s, ns, len(ids), "remove")
    words = moves.remove_jobs(s.conn, ns.queue, ids)
    s.say(f"remove {ns.queue}: {_tally(words)} (the {len(ids):,} previewed jobs)")
    return words
