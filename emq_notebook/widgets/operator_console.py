"""OperatorConsole: every operator verb against every queue state, live — pick both.

It shows the verb's catalogue entry (precondition, writes, replies, native
form); "Try it" builds that state on a scratch queue, runs the verb for real,
and shows the reply and the keyspace difference.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from functools import partial
from typing import Any

import ipywidgets as w

from .. import admin, jobs, lanes
from ..catalogue import describe
from ..connector import Connection
from ..decoding import printable
from ..errors import QueueInUse, Refused
from ..footprint import diff, footprint
from .base import Panel

JOB = "j_console"

# console label -> (catalogue entry, the call on (conn, queue, job id))
VERBS: dict[str, tuple[str, Callable[[Connection, str, str], Any]]] = {
    "pause": ("admin.pause", lambda c, q, j: admin.pause(c, q)),
    "resume": ("admin.resume", lambda c, q, j: admin.resume(c, q)),
    "drain": ("admin.drain", lambda c, q, j: admin.drain(c, q)),
    "obliterate": ("admin.obliterate", lambda c, q, j: admin.obliterate(c, q)),
    "obliterate --force": ("admin.obliterate", lambda c, q, j: admin.obliterate(c, q, force=True)),
    "update_data": ("jobs.update_data", lambda c, q, j: jobs.update_data(c, q, j, '{"mended": true}')),
    "update_progress": ("jobs.update_progress", lambda c, q, j: jobs.update_progress(c, q, j, "50")),
    "add_log": ("jobs.add_log", lambda c, q, j: jobs.add_log(c, q, j, "a line")),
    "get_job_logs": ("jobs.get_job_logs", lambda c, q, j: jobs.get_job_logs(c, q, j)),
    "remove_job": ("jobs.remove_job", lambda c, q, j: jobs.remove_job(c, q, j)),
    "reprocess_job": ("jobs.reprocess_job", lambda c, q, j: jobs.reprocess_job(c, q, j)),
    "reprocess_job (native twin)": (
        "jobs.reprocess_job",
        lambda c, q, j: jobs.reprocess_job(c.with_executor("function"), q, j),
    ),
    "get_job": ("jobs.get_job", lambda c, q, j: jobs.get_job(c, q, j)),
}


def _backlog(c: Connection, q: str) -> None:
    for n in (1, 2):
        jobs.enqueue(c, q, f'{{"backlog": {n}}}', id=f"j_backlog{n}")


def _job(c: Connection, q: str, *, state: str, group: str | None = None) -> None:
    jobs.enqueue(
        c,
        q,
        '{"to": "ops@example.com"}',
        id=JOB,
        group=group,
        max_attempts=1,
        priority=0 if state != "pending" else 5,
    )
    if state in ("active", "dead"):
        claim = lanes.claim if group else jobs.claim
        got = claim(c, q, 60_000)
        assert got and got[0] == JOB, got
        if state == "dead":
            jobs.fail(c, q, JOB, "SMTP 550: mailbox unavailable")


def _steps(*steps: Callable[[Connection, str], None]) -> Callable[[Connection, str], None]:
    def build_state(c: Connection, q: str) -> None:
        for step in steps:
            step(c, q)

    return build_state


_pending = partial(_job, state="pending")
_dead = partial(_job, state="dead")
_active = partial(_job, state="active")

# state label -> how to build it on an empty scratch queue
STATES: dict[str, Callable[[Connection, str], None]] = {
    "running · job pending": _steps(_backlog, _pending),
    "running · job dead": _steps(_dead, _backlog),
    "running · grouped job dead": _steps(partial(_job, state="dead", group="acme"), _backlog),
    "running · job in flight (locked)": _steps(_active, _backlog),
    "running · job missing": _backlog,
    "paused · job pending": _steps(_backlog, _pending, admin.pause),
    "paused · job dead": _steps(_dead, _backlog, admin.pause),
    "paused · jobs in flight": _steps(_active, _backlog, admin.pause),
}


def reply_text(result: Any) -> str:
    """How a reply reads: `None` (:ok), a refusal's one line, or the value's repr."""
    if isinstance(result, Refused):
        return result.line()
    if isinstance(result, dict):
        return repr(dict(sorted(result.items())))
    return repr(result)


def build(conn: Connection, q: str, state: str) -> None:
    """Reset the scratch queue, then build `state` on it. A scratch queue that holds
    keys a demo did not make is somebody's real queue: `QueueInUse`, nothing written."""
    # imported here: the package imports the widgets, and `python -m emq_notebook.demo`
    # must find demo not yet imported (runpy warns otherwise)
    from ..demo import fresh

    fresh(conn, q)
    STATES[state](conn, q)


def run(conn: Connection, q: str, verb: str) -> Any:
    """Run the console verb for real; a refusal is returned as the answer."""
    try:
        return VERBS[verb][1](conn, q, JOB)
    except Refused as refusal:
        return refusal


class OperatorConsole(Panel):
    def __init__(self, conn: Connection, scratch: str = "console"):
        super().__init__()
        self.conn, self.q, self.title = conn, scratch, scratch
        self.verb = w.Dropdown(options=list(VERBS), value="pause", description="verb")
        self.state = w.Dropdown(options=list(STATES), value="running · job pending", description="state")
        self.about = w.HTML()
        self.try_button = w.Button(description="Try it", button_style="primary")
        self.try_button.on_click(lambda _: self.try_it())
        self.reply = w.HTML()
        self.changes = w.HTML()
        self.reply_text = ""
        self.changed: list[str] = []
        # "Try it" rebuilds the scratch queue: a write, greyed out on a read-only connection
        self.writes(self.try_button)
        self.verb.observe(lambda _: self.show_about(), names="value")
        self.children = [
            w.HTML(f"<b>the operator console</b> · scratch queue <code>{scratch}</code>"),
            w.HBox([self.verb, self.state]),
            self.about,
            self.try_button,
            self.reply,
            self.changes,
            self.status,
        ]
        self.show_about()

    def show_about(self) -> None:
        self.about.value = "<pre>" + html.escape(describe(VERBS[self.verb.value][0])) + "</pre>"

    def facts(self) -> list[tuple[str, object]]:
        return [("scratch queue", self.q), ("verb", self.verb.value), ("state", self.state.value)]

    def try_it(self) -> tuple[str, list[str]] | None:
        if not self.writable(f"try {self.verb.value}"):
            return None
        try:
            build(self.conn, self.q, self.state.value)
        except QueueInUse as exc:  # the scratch name is a real queue here
            self.last = exc
            self.say(f"error: {exc}", "error")
            return None
        before = footprint(self.conn, self.q)
        with self.recording() as said:  # a click: its entry says so
            result = run(self.conn, self.q, self.verb.value)
        changed = diff(before, footprint(self.conn, self.q))
        self.reply_text = printable(reply_text(result))
        self.changed = [printable(line) for line in changed]
        self.reply.value = f"<b>reply</b>: <code>{html.escape(self.reply_text)}</code>"
        self.changes.value = "<pre>" + html.escape("\n".join(self.changed) or "(no key changed)") + "</pre>"
        self.say(f"{self.verb.value} on “{self.state.value}”: {len(self.changed)} changes{said.suffix()}")
        return self.reply_text, changed
