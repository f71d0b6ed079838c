"""The triage verbs: `find` (a search on the server, a frame) and `errors` (the
failures grouped by error signature). Both read only, in bounded calls."""

from __future__ import annotations

from argparse import Namespace

import pandas as pd

from .. import triage
from ..grammar import duration, limit, whole_arg
from ..registry import opt, verb
from .session import ERROR, PAYLOAD, QUEUE, SIGNATURE, STATE, Session, states


@verb(
    "find",
    "search a set on the server: jobs whose fields match (a frame)",
    QUEUE,
    STATE,
    ERROR,
    PAYLOAD,
    SIGNATURE,
    opt("--group"),
    opt("--min-attempts", type=whole_arg),
    opt("--since", type=duration, help="created within this long, e.g. 1h"),
    opt("--limit", type=limit, help="at most N rows (0: all; default: %%config default_limit)"),
)
def _find(s: Session, ns: Namespace) -> pd.DataFrame:
    rows = s.settings.default_limit if ns.limit is None else ns.limit
    after = None if ns.since is None else s.conn.server_ms() - ns.since
    frame = triage.find(
        s.conn,
        ns.queue,
        state=states(ns),
        error=ns.error,
        payload=ns.payload,
        signature=ns.signature,
        group=ns.group,
        min_attempts=ns.min_attempts,
        created_after=after,
        limit=rows or None,
        budget=s.settings.budget,
    )
    if rows and len(frame) >= rows:
        s.say(f"showing the first {rows:,} matches; --limit 0 for all")
    return frame


@verb("errors", "the failures grouped by error signature (a frame)", QUEUE, STATE)
def _errors(s: Session, ns: Namespace) -> pd.DataFrame:
    return triage.errors(s.conn, ns.queue, states(ns), budget=s.settings.budget)
