"""AuditView: the audit trail as a table, newest first (the dashboard's Audit tab).

Who did what to which queue, when, why, and what came of it (`frames.audit`): one
queue's entries, or every queue's (obliterated ones too). Two filters narrow the
rows shown, by verb and by who (the choices are those the entries read hold);
Refresh reads the entries again. Reads only, at most `limit` entries a read (a
stream a page at a time, each page a read-only `@read_audit` call held to the byte
budget), so it works on a read-only session and costs the same beside any number of
jobs.
"""

from __future__ import annotations

import html

import ipywidgets as w
import pandas as pd

from .. import frames
from ..connector import Connection
from ..decoding import visible
from ..errors import EMQError
from ..keyspace import check_name
from . import values
from .base import Panel

ALL = "(all)"
_HEAD = ("time", "queue", "verb", "outcome", "count", "who", "surface", "reason")
_OUTCOME_COLOURS = {"done": "#1a7f37", "error": "#cf222e", "unknown": "#9a6700"}


def _outcome(text: str) -> str:
    colour = _OUTCOME_COLOURS.get(text, "#9a6700" if text.startswith("refused") else "#57606a")
    return f'<span style="color:{colour}">{html.escape(visible(text))}</span>'


def audit_table(entries: pd.DataFrame) -> str:
    """The entries as a small HTML table (escaped; bytes that are not UTF-8 as `\\xNN`)."""
    if entries.empty:
        return "<i>no audit entry</i>"
    rows = []
    for r in entries.to_dict("records"):
        cells = [
            html.escape(values.when(r["time"])),
            html.escape(visible(r["queue"])),
            html.escape(visible(r["verb"])),
            _outcome(r["outcome"]),
            "" if pd.isna(r["count"]) else f"{int(r['count']):,}",
            html.escape(visible(r["who"])),
            html.escape(visible(r["surface"])),
            html.escape(visible(r["reason"])),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in _HEAD)
    return f'<table class="emq"><tr>{head}</tr>{"".join(rows)}</table>'


class AuditView(Panel):
    """`AuditView(conn, queue=None, limit=200)`: the audit entries, newest first, with a
    filter by verb and by who, and Refresh. Reads only."""

    title = "audit"

    def __init__(self, conn: Connection, queue: str | None = None, limit: int = 200, owned: bool = False):
        super().__init__(owned=owned)
        self.conn = conn
        self.q = None if queue is None else check_name(queue)
        self.limit = limit
        self.title = f"audit {self.q or 'every queue'}"
        self.entries = frames.audit(conn, self.q, limit=limit).iloc[0:0]
        self.verb = w.Dropdown(options=[ALL], value=ALL, description="verb")
        self.who = w.Dropdown(options=[ALL], value=ALL, description="who")
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.table = w.HTML()
        self.verb.observe(lambda _: self.show(), names="value")
        self.who.observe(lambda _: self.show(), names="value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.children = [w.HBox([self.verb, self.who, self.refresh_button]), self.table, self.status]
        self.refresh()

    def refresh(self) -> None:
        """Read the entries again (`frames.audit`, kept in `.entries`); keeps the
        filters where they still apply."""
        try:
            self.entries = frames.audit(self.conn, self.q, limit=self.limit)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        for box, column in ((self.verb, "verb"), (self.who, "who")):
            chosen = box.value
            box.options = [ALL, *sorted(set(self.entries[column]))]
            box.value = chosen if chosen in box.options else ALL
        self.show()

    def shown(self) -> pd.DataFrame:
        """The entries the filters let through, newest first."""
        kept = self.entries
        if self.verb.value != ALL:
            kept = kept[kept.verb == self.verb.value]
        if self.who.value != ALL:
            kept = kept[kept.who == self.who.value]
        return kept

    def show(self) -> None:
        kept = self.shown()
        self.table.value = audit_table(kept)
        self.say(
            f"{len(kept):,} of {len(self.entries):,} entries (newest first, at most {self.limit:,} read)"
        )

    def facts(self) -> list[tuple[str, object]]:
        return [("queue", self.q or "every queue"), ("verb", self.verb.value), ("who", self.who.value)]
