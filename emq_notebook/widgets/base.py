"""What every panel shares: a header naming the connection and its env, a status
line that shows the last result or typed refusal, writing buttons greyed out on a
read-only connection, the question a bulk button asks before it acts
(`Confirmation`), a bulk action's labelled progress (`Progress`), a static fallback
for saved notebooks, and the registry that keeps one background thread per panel.

A panel that writes (it named its writing buttons, `writes`) shows, above its status
line, whoever built its children: a reason box, whose text is the `reason` of the
audit entry of each write a click makes (`recording`; empty: the session's reason),
and a line that says why each greyed-out button is greyed out (`off`: the same words
are the button's tooltip), so no button is off without saying why.

The static fallback: a saved notebook read where no widget runs (GitHub,
nbviewer) shows the `text/html` or `text/plain` of the display bundle, so the
bundle carries a table of what the panel showed when it was displayed (counts,
row fields, last events) next to the widget view.

The registry: a panel with a background thread (auto-refresh, an events tail)
is registered under (kind, connection label, queue); building the same kind
again for the same queue and connection closes the previous one, so re-running
a cell never leaves a second thread behind, and every registered panel is
stopped at interpreter exit.

An owned panel (`owned=True`) is shown inside another one (a dashboard tab): it
holds no registry slot and shows no header of its own, because its owner names
the connection once and stops the owned panel's thread when it closes.
"""

from __future__ import annotations

import atexit
import contextlib
import html
import math
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import ipywidgets as w
import traitlets

from .. import audit
from ..connector import Connection
from ..decoding import visible
from ..errors import BadInput, EMQError, ReadOnly, Refused
from .refresher import Refresher

# an auto-refresh faster than twice a second is a busy loop against the server
MIN_INTERVAL_S = 0.5
MAX_INTERVAL_S = 86_400.0

_registry: dict[tuple[str, str, str], Panel] = {}
_registry_lock = threading.Lock()
_atexit_registered = False


def interval(value: object, what: str = "refresh interval") -> float:
    """Seconds between two refreshes, from 0.5 s to a day, else `BadInput` (0 would spin)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S
    ):
        raise BadInput(f"{what} must be from {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds, not {value!r}")
    return float(value)


def live_panels() -> list[Panel]:
    """The registered panels (each holds at most one background thread)."""
    with _registry_lock:
        return list(_registry.values())


def close_all() -> None:
    """Stop every registered panel's thread (run at interpreter exit)."""
    for panel in live_panels():
        try:
            panel.stop_threads()
        except Exception:  # at exit the server may be gone already; the thread still ends
            pass
        panel._unregister()


def _render(exc: EMQError) -> str:
    return exc._render_traceback_()[0]


class Panel(w.VBox):
    """A VBox with a connection header and a status line; `attempt` runs a verb and
    reports its answer there; `writes` names the buttons a read-only connection greys out."""

    title = "panel"
    conn: Connection

    def __init__(self, owned: bool = False, **kw: Any) -> None:
        self.owned = owned
        self.status = w.HTML(value="")
        self.status_text = ""
        self.heading = w.HTML(value="")
        self.last: Any = None
        self._writing: list[w.Widget] = []
        # the reason typed for the next writes, and why each greyed-out button is off
        self.reason = w.Text(
            placeholder="why: recorded as the reason of each write below",
            description="reason",
            layout=w.Layout(width="min(560px, 100%)"),
        )
        self.why_off = w.HTML()
        self._why: dict[w.Widget, str] = {}
        self._tips: dict[w.Widget, str | None] = {}
        self._registry_key: tuple[str, str, str] | None = None
        self.refresher: Refresher | None = None
        super().__init__(**kw)
        if owned:
            self.heading.layout.display = "none"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.title})"

    # -- the connection header -------------------------------------------------
    @property
    def read_only(self) -> bool:
        conn = getattr(self, "conn", None)
        return conn is not None and conn.read_only

    @property
    def env(self) -> str | None:
        conn = getattr(self, "conn", None)
        return conn.env if conn is not None else None

    @property
    def label(self) -> str:
        conn = getattr(self, "conn", None)
        return visible(conn.label) if conn is not None else "(no connection)"

    def connection_line(self) -> str:
        """`env production · read-only · connected: redis://...` (the label last, as the
        connect line ends, so one sanitize rule covers both)."""
        env = f"env {self.env}" if self.env else "env not set"
        return f"{env}{' · read-only' if self.read_only else ''} · connected: {self.label}"

    # what the header says before the connection (the dashboard: "EchoMQ queues")
    heading_title = ""

    def _heading_html(self) -> str:
        """The one header of every panel: its title, the env as a badge (red for
        production), a read-only badge, then the redacted connection label."""
        badge = "padding:1px 8px;border-radius:10px;font-weight:600"
        if self.env == "production":
            env = f'<span style="background:#cf222e;color:white;{badge}">production</span>'
        elif self.env:
            name = html.escape(visible(self.env))
            env = f'<span style="background:#57606a;color:white;{badge}">{name}</span>'
        else:
            env = f'<span style="background:#eaeef2;color:#57606a;{badge}">env not set</span>'
        ro = (
            f' <span style="background:#fff8c5;color:#7d4e00;{badge}">read-only</span>'
            if self.read_only
            else ""
        )
        title = f"<b>{html.escape(self.heading_title)}</b> &nbsp;" if self.heading_title else ""
        return (
            f'<div style="line-height:26px">{title}{env}{ro}'
            f' &nbsp;<span style="color:#57606a">connected: {html.escape(self.label)}</span></div>'
        )

    @traitlets.validate("children")
    def _children_start_with_heading(self, proposal: Any) -> tuple:
        # every panel's first line names its connection and env, and a panel that writes
        # shows its reason box and why its buttons are off, whoever built the children
        children = tuple(proposal["value"])
        if self._writing and self.reason not in children:
            at = children.index(self.status) if self.status in children else len(children)
            children = (*children[:at], self.reason, self.why_off, *children[at:])
        if getattr(self, "conn", None) is None or self.heading in children:
            return children
        self.heading.value = self._heading_html()
        return (self.heading, *children)

    # -- writing: greyed out with a reason, recorded with one ---------------------
    def writes(self, *buttons: w.Widget) -> None:
        """Name the buttons that write; on a read-only connection they are greyed out."""
        self._writing.extend(buttons)
        for b in buttons:
            self.off(b, None)

    def off(self, button: w.Widget, why: str | None) -> None:
        """Grey `button` out because of `why` (its tooltip and the panel's greyed-out line
        say it), or let it be clicked (None). A writing button stays greyed out on a
        read-only connection whatever `why` is."""
        if why is None and self.read_only and button in self._writing:
            why = "read-only connection"
        self._tips.setdefault(button, getattr(button, "tooltip", None))
        button.disabled = why is not None
        button.tooltip = why if why is not None else self._tips[button]
        if why is None:
            self._why.pop(button, None)
        else:
            self._why[button] = why
        self._say_off()

    def _say_off(self) -> None:
        """The greyed-out line: the shown buttons that are off, grouped by why."""
        if self.read_only and self._writing:
            said = "read-only connection: every writing button is greyed out"
        else:
            grouped: dict[str, list[str]] = {}
            # the writing buttons in the order they were named, then the others
            for button in dict.fromkeys([*self._writing, *self._why]):
                why = self._why.get(button)
                if why is not None and button.layout.display != "none":
                    grouped.setdefault(why, []).append(str(getattr(button, "description", "")))
            said = "; ".join(f"{', '.join(names)}: {why}" for why, names in grouped.items())
            said = f"greyed out · {said}" if said else ""
        self.why_off.value = (
            f'<small class="emq-why-off" style="color:#57606a">{html.escape(visible(said))}</small>'
            if said
            else ""
        )

    def reason_typed(self) -> str | None:
        """The reason typed in the panel's box, or None (the session's reason then)."""
        return self.reason.value.strip() or None

    @contextlib.contextmanager
    def recording(self) -> Iterator[audit.Said]:
        """Around one click's writes: their audit entries say surface `panel` and the
        reason typed in the box (`audit.because`); none typed leaves the reason given
        around the click, else the session's."""
        typed = self.reason_typed()
        given = audit.because(typed) if typed else contextlib.nullcontext()
        with audit.surface("panel") as said, given:
            yield said

    def writable(self, what: str) -> bool:
        """False (and the `ReadOnly` line in the status) when the connection is read-only."""
        try:
            self.conn.refuse_writes(what)
        except ReadOnly as refusal:
            self.last = refusal
            self.say(_render(refusal), "refused")
            return False
        return True

    # -- the status line ----------------------------------------------------------
    def say(self, text: str, kind: str = "ok") -> None:
        text = visible(text)
        colour = {"ok": "#1a7f37", "refused": "#9a6700", "error": "#cf222e"}[kind]
        self.status.value = f'<span style="color:{colour}">{html.escape(text)}</span>'
        self.status_text = text

    def attempt(
        self, verb: Callable[..., Any], *args: Any, done: str | Callable[[Any], str] = "", **kwargs: Any
    ) -> Any:
        """Run one verb; show its result, its refusal, or its error on the status line.
        Its audit entry says surface `panel` and the reason typed (`recording`); one that
        could not be written ends the line."""
        try:
            with self.recording() as said:
                result = verb(*args, **kwargs)
        except Refused as refusal:
            self.last = refusal
            self.say(refusal.line() + said.suffix(), "refused")
            return refusal
        except ReadOnly as exc:
            self.last = exc
            self.say(_render(exc), "refused")
            return exc
        except EMQError as exc:
            self.last = exc
            self.say(f"error: {exc}" + said.suffix(), "error")
            return exc
        self.last = result
        self.say((done(result) if callable(done) else done) + said.suffix())
        return result

    # -- the static fallback --------------------------------------------------------
    def facts(self) -> list[tuple[str, Any]]:
        """What the panel shows that no HTML line of it says (button states, gates)."""
        return []

    def _shown(self) -> Iterator[str]:
        """The HTML lines the panel shows, in order (hidden rows, the header and status apart)."""

        def walk(children: tuple) -> Iterator[str]:
            for child in children:
                if child is self.heading or child is self.status or child.layout.display == "none":
                    continue
                if isinstance(child, w.HTML) and child.value:
                    yield child.value
                elif isinstance(child, w.Box):
                    yield from walk(child.children)

        return walk(self.children)

    def static_html(self) -> str:
        """The panel as plain HTML: its header, a table of its facts, what it shows, its status."""
        parts = [f"<div><b>{html.escape(repr(self))}</b> · {self._heading_html()}</div>"]
        if self.facts():
            parts.append(table(self.facts(), ("", "")))
        parts += [f"<div>{v}</div>" for v in self._shown()]
        if self.status_text:
            parts.append(f"<div>status: {html.escape(self.status_text)}</div>")
        return '<div class="emq-panel">' + "".join(parts) + "</div>"

    def static_text(self) -> str:
        """The panel as lines of text (what `text/plain` carries)."""
        lines = [f"{self!r} · {self.connection_line()}"]
        lines += [f"{visible(k)}: {visible(v)}" for k, v in self.facts()]
        lines += [plain(v) for v in self._shown()]
        if self.status_text:
            lines.append(f"status: {self.status_text}")
        return "\n".join(line for line in lines if line)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        # ipywidgets' own bundle keeps the live view; the text keys are the saved-notebook view
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.static_text()
        bundle["text/html"] = self.static_html()
        return bundle

    @property
    def confirming(self) -> bool:
        """True while a question of this panel waits for Confirm (an owner's refresh waits)."""
        return False

    # -- the one refresh loop and shutdown --------------------------------------------
    def refresh(self) -> None:
        """Read what the panel shows again (each panel says what)."""

    def every(self, seconds: float, name: str, *, stop_on_error: bool = False, tick: Any = None) -> None:
        """Give the panel its one background refresh: `tick` (its `refresh` unless named)
        every `seconds`, in a thread called `name`; off until `start()`."""
        self.refresher = Refresher(
            name, seconds, tick or self.refresh, self._refresh_failed, stop_on_error=stop_on_error
        )

    @property
    def running(self) -> bool:
        """True while the panel's background refresh runs."""
        return self.refresher is not None and self.refresher.running

    def start(self) -> None:
        """Start the background refresh (one thread; a running one is stopped first)."""
        if self.refresher is not None:
            self.refresher.start()
        self.show_running()

    def stop(self) -> None:
        """Stop the background refresh (joined before returning)."""
        self.stop_threads()
        self.show_running()

    def toggle(self) -> None:
        self.stop() if self.running else self.start()

    def show_running(self) -> None:
        """Show whether the refresh runs (its button, its line); each panel says how."""

    def _refresh_failed(self, exc: Exception) -> None:
        """A background refresh met an error: said on the status line, never printed into
        a cell; a refresh that stops on error shows itself stopped."""
        if self.refresher is not None and self.refresher.stop_on_error:
            self.say(f"auto-refresh stopped: {type(exc).__name__}: {exc}", "error")
            self.show_running()
        else:
            self.say(f"error: {type(exc).__name__}: {exc}", "error")

    def stop_threads(self) -> None:
        """Stop this panel's background threads (joined before returning): the refresh,
        and whatever else a panel runs (`stop_more`)."""
        if self.refresher is not None:
            self.refresher.stop()
        self.stop_more()

    def stop_more(self) -> None:
        """Stop a thread the panel runs besides its refresh (the events tail)."""

    def _register(self, q: str) -> None:
        """Hold this panel's slot (kind, connection label, queue); close the one it replaces."""
        global _atexit_registered
        if self.owned:  # its owner holds the slot and stops it
            return
        key = (type(self).__name__, self.label, q)
        with _registry_lock:
            previous = _registry.get(key)
            _registry[key] = self
            self._registry_key = key
            if not _atexit_registered:
                # registered at the first panel, after any embedded server it uses, so it runs
                # (last in, first out) before that server is stopped
                atexit.register(close_all)
                _atexit_registered = True
        if previous is not None and previous is not self:
            previous._registry_key = None
            previous.close()

    def _unregister(self) -> None:
        with _registry_lock:
            if self._registry_key is not None and _registry.get(self._registry_key) is self:
                del _registry[self._registry_key]
            self._registry_key = None

    def close(self) -> None:
        """Stop the panel's threads, give up its slot, close its widgets."""
        self.stop_threads()
        self._unregister()
        super().close()


class Progress:
    """A bulk action's bar and the line beside it that says what it does and how far it
    got ("reprocessing 840: 300 done"), then what came of it (the action's status line);
    hidden until the first action. `view` is its widget."""

    def __init__(self) -> None:
        self.bar = w.IntProgress(value=0, min=0, max=1)
        self.label = w.HTML()
        self.view = w.HBox([self.bar, self.label], layout=w.Layout(display="none", align_items="center"))
        self.doing, self.total = "", 0

    def start(self, doing: str, total: int) -> None:
        """Show the bar at 0 of `total`, labelled `doing` ("reprocessing")."""
        self.doing, self.total = doing, total
        self.bar.max, self.bar.value = max(total, 1), 0
        self.view.layout.display = "flex"
        self.step(0)

    def step(self, done: int) -> None:
        self.bar.value = min(max(done, 0), self.bar.max)
        said = f"{self.doing} {self.total:,}: {done:,} done"
        self.label.value = f"<small>{html.escape(visible(said))}</small>"

    def end(self, said: str, whole: bool) -> None:
        """The action ended: the line says `said` (its result, refusal or error); the bar
        is full when it ended `whole`, else stays where it got."""
        if whole:
            self.bar.value = self.bar.max
        self.label.value = f"<small>{html.escape(visible(said))}</small>"


@dataclass
class Question:
    """What a `Confirmation` asks: "`doing` `count` `what`? `note`", and what Confirm does.

    `recount` counts again at Confirm (more than stated: asked again); `changed` answers
    the question as it stands at Confirm when what it named changed since (the
    selection), with the words that say so, else None; `always` asks whatever the count
    (a removal deletes rows for good)."""

    doing: str
    count: int
    what: str
    act: Callable[[int], Any]
    recount: Callable[[], int | None] | None = None
    note: str = ""
    changed: Callable[[], tuple[Question, str] | None] | None = None
    always: bool = False


class Confirmation:
    """The one question a bulk button asks before it acts, as Drain asks it: the count,
    what and where, then the connection and its env (`Reprocess 1,500 dead jobs of
    mailers? at most 50 a second` / `env production · connected: redis://...`), with
    Confirm and Cancel.

    `guard(question, above)` asks when the question is about more than `above` jobs
    (the `confirm_above` setting) or always asks, else acts at once. `ask(...)` shows
    the question and acts on nothing; Confirm re-checks the session (read-only), then
    what the question named (`changed`, `recount`: more jobs than it stated, or another
    selection, asks again and does nothing), else calls `act(count)` with the count the
    question stated, its button greyed out while it works. A panel holds one (`view` is
    its widget): a new question replaces an open one, and `cancel()` closes it."""

    def __init__(self, panel: Panel) -> None:
        self.panel = panel
        self.text = w.HTML()
        self.confirm_button = w.Button(description="Confirm", button_style="warning")
        self.confirm_button.on_click(lambda _: self.confirm())
        self.cancel_button = w.Button(description="Cancel")
        self.cancel_button.on_click(lambda _: self.cancel(said="cancelled; nothing done"))
        self.buttons = w.HBox([self.confirm_button, self.cancel_button], layout=w.Layout(display="none"))
        self.view = w.VBox([self.text, self.buttons])
        self.asked: Question | None = None
        panel.writes(self.confirm_button)

    @property
    def open(self) -> bool:
        """True while a question waits for Confirm or Cancel."""
        return self.asked is not None

    def guard(self, question: Question, above: int) -> Any:
        """Ask `question` when it is about more than `above` jobs (or always asks); else
        act at once and answer what `act` did."""
        if question.always or question.count > above:
            self.ask(question)
            return None
        self.cancel()
        return question.act(question.count)

    def ask(self, question: Question, again: str = "") -> None:
        """Show `question` above the connection line, with Confirm and Cancel; nothing is done."""
        self.asked = question
        q = question
        note = f" {html.escape(visible(q.note))}" if q.note else ""
        self.text.value = (
            f"{html.escape(again)}{html.escape(q.doing)} <b>{q.count:,}</b> {html.escape(visible(q.what))}?"
            f"{note}<br><small>{html.escape(self.panel.connection_line())}</small>"
        )
        self.buttons.layout.display = "flex"

    def cancel(self, said: str = "") -> None:
        """Close the question; nothing is done."""
        self.asked = None
        self.text.value = ""
        self.buttons.layout.display = "none"
        if said:
            self.panel.say(said)

    def confirm(self) -> Any:
        """Act on the count the question stated, after the re-checks; answers what `act` did."""
        q = self.asked
        if q is None or not self.panel.writable(q.doing.lower()):
            return None
        if q.changed is not None:
            now = q.changed()
            if now is not None:
                self.ask(now[0], again=now[1])
                self.panel.say(f"not done: {now[1].strip()} Confirm again", "refused")
                return None
        if q.recount is not None:
            count = q.recount()
            if count is None:  # the count failed: the panel said why
                return None
            if count > q.count:
                self.ask(
                    replace(q, count=count), again=f"The count changed (the question said {q.count:,}). "
                )
                self.panel.say(f"not done: {count:,} jobs now; confirm again", "refused")
                return None
        self.cancel()
        self.confirm_button.disabled = True
        try:
            return q.act(q.count)
        finally:
            self.confirm_button.disabled = self.panel.read_only


def counted(doing: str, n: int, what: str = "") -> str:
    """A bulk button's label restating the count it acts on: `Reprocess 840 previewed`;
    without the count while there is nothing (`Reprocess previewed`)."""
    return " ".join(part for part in (doing, f"{n:,}" if n else "", what) if part)


def plain(markup: str) -> str:
    """HTML as text lines: a table row per line, cells joined by ` | `."""
    text = re.sub(r"</t[dh]>\s*(?=<t[dh])", " | ", markup)
    text = re.sub(r"<br\s*/?>|</(tr|div|p|pre|li|table)>", "\n", text)
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return "\n".join(s for s in (line.strip() for line in text.splitlines()) if s)


def table(rows: dict[str, Any] | list[tuple], head: tuple[str, ...] = ()) -> str:
    """A small HTML table (escaped; undecodable bytes shown as `\\xNN`)."""
    items = rows.items() if isinstance(rows, dict) else rows
    cells = "".join(
        "<tr>" + "".join(f"<td>{html.escape(visible(c))}</td>" for c in r) + "</tr>"
        for r in ((k, *([v] if not isinstance(v, tuple) else v)) for k, v in items)
    )
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f'<table class="emq">{"<tr>" + th + "</tr>" if any(head) else ""}{cells}</table>'


# a set's colour wherever the panels show counts: (background, text)
STATE_COLOURS = {
    "pending": ("#ddf4ff", "#0550ae"),
    "active": ("#dafbe1", "#116329"),
    "schedule": ("#fbefff", "#6e40c9"),
    "dead": ("#ffebe9", "#a40e26"),
    "paused": ("#fff8c5", "#7d4e00"),
    "running": ("#dafbe1", "#116329"),
    "none": ("#f6f8fa", "#57606a"),
}


def chip(label: str, value: Any = None, colour: str = "none") -> str:
    """One rounded badge, `label 1,234`; numbers with thousands separators."""
    back, fore = STATE_COLOURS.get(colour, STATE_COLOURS["none"])
    shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
    number = "" if value is None else f" <b>{html.escape(visible(shown))}</b>"
    return (
        f'<span class="emq-chip" style="display:inline-block;background:{back};color:{fore};'
        f'border-radius:12px;padding:2px 10px;margin:2px 6px 2px 0;white-space:nowrap">'
        f"{html.escape(visible(label))}{number}</span>"
    )


def chips(counts: dict[str, int], paused: bool) -> str:
    """A queue's counts as coloured chips (a set with no jobs in grey), then its state."""
    parts = [chip(name, n, name if n else "none") for name, n in counts.items()]
    parts.append(chip("■ paused", colour="paused") if paused else chip("▶ running", colour="running"))
    return '<div class="emq-chips">' + "".join(parts) + "</div>"
