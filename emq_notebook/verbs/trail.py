"""The audit trail's verbs: `reason` (the session's reason, in every entry its
commands write) and `audit` (who did what to which queue, when and why: a frame).
Every writing verb takes `--reason TEXT` for itself (`registry.REASON`)."""

from __future__ import annotations

from argparse import Namespace

import pandas as pd

from .. import audit
from ..grammar import duration, limit
from ..redaction import scrub
from ..registry import arg, opt, verb
from .session import Session


@verb(
    "reason",
    "the session's reason, written in each audit entry (none given: show it)",
    arg("text", free=True, nargs="*", metavar="TEXT"),
    opt("--clear", action="store_true", help="no reason from now on"),
    needs_server=False,
)
def _reason(s: Session, ns: Namespace) -> None:
    """Shows the reason as the entries hold it (`scrub`: no URL's password)."""
    c = s.front.command
    if not ns.text and not ns.clear:
        now = s.settings.reason
        s.say(
            f"reason: {scrub(now)}"
            if now
            else f"no reason set: {c} reason TEXT (or --reason TEXT on one command)"
        )
        return
    text = "" if ns.clear else " ".join(ns.text).strip()
    s.set_reason(text or None)
    s.say(f"reason: {scrub(text)} (each audit entry of this session says it)" if text else "reason cleared")


@verb(
    "audit",
    "the audit trail: who did what, when, why (newest first; a frame)",
    arg("queue", nargs="?", help="one queue's (default: every queue's, obliterated ones too)"),
    opt("--since", type=duration, help="the last this long, e.g. 1h"),
    opt(
        "--limit",
        type=limit,
        help="at most N entries (0: the most a read answers; default: %%config default_limit)",
    ),
)
def _audit(s: Session, ns: Namespace) -> pd.DataFrame:
    rows = s.settings.default_limit if ns.limit is None else ns.limit
    frame = audit.read(s.conn, ns.queue, since_ms=ns.since, limit=rows or audit.MAX_READ)
    if rows and len(frame) >= rows:
        s.say(f"showing the newest {rows:,} entries; --limit 0 for more")
    return frame
