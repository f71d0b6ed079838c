"""ClaimGate: the pause gate of a queue, live — toggle it, then run a claim.

Paused, a claim answers empty and the backlog is untouched; resumed, it serves
the head of pending. The line under it says which round trips ran.
"""

from __future__ import annotations

import html

import ipywidgets as w

from .. import admin, frames, jobs
from ..connector import Connection
from ..decoding import printable
from ..keyspace import queue_key
from .base import Panel

# ids shown per set; a longer set shows its head and how many more
SHOWN = 10


def _ids(head: list[str], count: int) -> str:
    if not count:
        return "[empty]"
    more = f", … {count - len(head)} more" if count > len(head) else ""
    return f"[{html.escape(printable(', '.join(head)))}{more}]"


class ClaimGate(Panel):
    def __init__(self, conn: Connection, q: str, lease_ms: int = 60_000):
        super().__init__()
        self._syncing = False
        self.conn, self.q, self.title, self.lease_ms = conn, q, q, lease_ms
        self.gate = w.ToggleButton(description="Paused", value=admin.is_paused(conn, q))
        self.gate.observe(lambda ch: self.set_paused(ch["new"]), names="value")
        self.claim_button = w.Button(description="Run a claim", button_style="primary")
        self.claim_button.on_click(lambda _: self.run_claim())
        self.add_button = w.Button(description="Add a job")
        self.add_button.on_click(lambda _: self.add_job())
        self.backlog = w.HTML()
        self.trips = w.HTML()
        self.trips_text = ""
        self.writes(self.gate, self.claim_button, self.add_button)
        self.children = [
            w.HTML(f"<b>the claim gate · {q}</b>"),
            w.HBox([self.gate, self.claim_button, self.add_button]),
            self.backlog,
            self.status,
            self.trips,
        ]
        self.refresh()

    def refresh(self) -> None:
        paused = admin.is_paused(self.conn, self.q)
        # the head of each set, as many ids as a line holds; the counts are exact
        pending = frames.members_page(self.conn, queue_key(self.q, "pending"), 0, SHOWN)[0]
        active = frames.members_page(self.conn, queue_key(self.q, "active"), 0, SHOWN)[0]
        self.pending_count = self.conn.command("ZCARD", queue_key(self.q, "pending"))
        self.active_count = self.conn.command("ZCARD", queue_key(self.q, "active"))
        self.gate.description = "Paused" if paused else "Running"
        self.backlog.value = (
            f"queue {'paused' if paused else 'running'} · pending "
            f"{_ids(pending, self.pending_count)} · active "
            f"{_ids(active, self.active_count)}"
        )
        self.paused, self.pending, self.active = paused, pending, active
        # the toggle follows the queue (a change made elsewhere), without writing anything
        self._syncing = True
        try:
            self.gate.value = paused
        finally:
            self._syncing = False

    def facts(self) -> list[tuple[str, object]]:
        return [
            ("queue", self.q),
            ("state", "paused" if self.paused else "running"),
            ("pending", self.pending_count),
            ("active", self.active_count),
        ]

    def set_paused(self, paused: bool) -> None:
        if self._syncing:
            return
        if not self.writable("pause" if paused else "resume"):
            self.refresh()
            return
        with self.recording():
            (admin.pause if paused else admin.resume)(self.conn, self.q)
        self.say(
            f"{'paused' if paused else 'resumed'} {self.q}: the field on emq:{{{self.q}}}:meta, no set moved"
        )
        self.refresh()

    def add_job(self) -> None:
        if not self.writable("enqueue"):
            return
        with self.recording():
            jid = jobs.enqueue(self.conn, self.q, '{"demo": true}')
        self.say(f"enqueued {jid}")
        self.refresh()

    def round_trips(self) -> str:
        if self.conn.folds_pause:
            return "one round trip: FCALL emq_native_claim (the paused read folded into the claim)"
        return f"round trip 1: HGET emq:{{{self.q}}}:meta paused → " + (
            "set: stop, answer empty (no script ran)"
            if admin.is_paused(self.conn, self.q)
            else "nil → round trip 2: EVALSHA claim2 (the live claim script, no pause logic)"
        )

    def run_claim(self) -> jobs.Claimed | None:
        if not self.writable("claim"):
            return None
        trips = self.round_trips()
        with self.recording():
            got = jobs.claim(self.conn, self.q, self.lease_ms)
        before = (self.pending_count, list(self.pending))
        self.refresh()
        if got is None:
            why = "paused" if admin.is_paused(self.conn, self.q) else "empty"
            untouched = (self.pending_count, self.pending) == before
            kept = "the backlog is untouched" if untouched else "the backlog changed"
            self.say(f"claim answered empty ({why}); {kept}: {self.pending_count} pending")
        else:
            self.say(f"claimed {got[0]}: pending -> active (attempts {got[2]})")
        self.trips_text = trips
        self.trips.value = f"<small>{html.escape(trips)}</small>"
        self.last = got
        return got
