"""LanesView and RepeatablesView: a queue's lanes (pending, in flight, limit,
paused) with lane pause / resume / limit, and its repeatables with Run now.

Both are tables read in bounded calls, whatever the queue holds: a refresh of the
lanes reads the first `SHOWN_LANES` lanes (`lanes.lanes`, a page of the set's own
order) and counts the rest, and a lane past them is found by its name (the Find box:
`lanes.lane`, a handful of commands); a row click picks the lane or the repeatable
the buttons act on. Run now is `repeat.run_now`: one job from the repeatable now, its
cadence kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as w
import pandas as pd

from .. import lanes, repeat
from ..connector import Connection
from ..decoding import printable, shown_id, visible
from ..defaults import DEFAULT_LIMIT
from ..errors import EMQError
from ..keyspace import queue_key
from . import grid as grids
from .base import Panel

LANE_COLOURS = {
    "paused": "cell.value == 'yes' ? '#fff8c5' : 'white'",
    "active": "cell.value >= cell.metadata.data['limit'] && cell.value > 0 ? '#ddf4ff' : 'white'",
}
# the lanes a refresh reads and shows, at most (one `@read_lanes` call of their counts):
# a queue of a million lanes costs an open panel what one of 200 does
SHOWN_LANES = 200


class LanesView(Panel):
    def __init__(self, conn: Connection, q: str, owned: bool = False):
        super().__init__(owned=owned)
        self.conn, self.q, self.title = conn, q, q
        self.frame = pd.DataFrame()
        self.total = 0
        # a lane found by its name (the Find box), shown first and read again each refresh
        self.found: str | None = None
        self.grid = grids.grid(_lanes_frame({}), colours=LANE_COLOURS, index_px=160)
        self.grid.on_cell_click(self._clicked)
        self.lane = w.Dropdown(options=[], description="lane")
        self.find_box = w.Text(
            placeholder="a lane's name",
            description="find",
            continuous_update=False,
            layout=w.Layout(width="260px"),
        )
        # Enter (or leaving the box) with a changed name finds it
        self.find_box.observe(lambda _: self.find(), names="value")
        self.find_button = w.Button(description="Find")
        self.find_button.on_click(lambda _: self.find())
        self.pause_button = w.Button(description="Pause lane")
        self.pause_button.on_click(lambda _: self.pause())
        self.resume_button = w.Button(description="Resume lane")
        self.resume_button.on_click(lambda _: self.resume())
        self.limit = w.BoundedIntText(
            value=1, min=1, max=1_000_000, description="limit", layout=w.Layout(width="180px")
        )
        self.limit_button = w.Button(description="Set limit")
        self.limit_button.on_click(lambda _: self.set_limit())
        self.summary = w.HTML()
        self.writes(self.pause_button, self.resume_button, self.limit_button)
        self.lane.observe(lambda _: self._gate(), names="value")
        self.children = [
            self.summary,
            w.HBox([self.find_box, self.find_button]),
            self.grid,
            w.HBox([self.lane, self.pause_button, self.resume_button, self.limit, self.limit_button]),
            self.status,
        ]
        self.refresh()

    def _read(self) -> tuple[dict[str, dict], int]:
        """The lanes shown (the one found by name first) and how many the queue has."""
        listed = lanes.lanes(self.conn, self.q, limit=SHOWN_LANES)
        found = lanes.lane(self.conn, self.q, self.found) if self.found is not None else None
        shown = {self.found: found} if found is not None and self.found is not None else {}
        shown.update((g, entry) for g, entry in listed.items() if g != self.found)
        return shown, listed.total

    def refresh(self) -> None:
        try:
            found, total = self._read()
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        frame = _lanes_frame(found)
        if not frame.equals(self.frame):
            self.frame = frame
            grids.patch(self.grid, frame)
        keep = self.lane.value
        self.lane.options = [(printable(str(shown_id(g))), g) for g in frame.index]
        if keep in frame.index:
            self.lane.value = keep
        self._gate()
        self.total = total
        listed = len(frame) - (self.found in frame.index)
        past = f" (the first {listed:,} met shown; find any other by its name)" if total > listed else ""
        self.summary.value = (
            f"<div>{total:,} lanes of <b>{self.q}</b>{past}</div>"
            if total
            else f"<div><i>{self.q} has no lanes (no grouped jobs yet)</i></div>"
        )

    def _gate(self) -> None:
        why = None if self.lane.value is not None else "pick a lane first"
        for button in (self.pause_button, self.resume_button, self.limit_button):
            self.off(button, why)

    def find(self) -> None:
        """Show the lane named in the Find box (first in the grid) and pick it."""
        name = self.find_box.value.strip()
        if not name:
            self.found = None
            self.refresh()
            return
        try:
            entry = lanes.lane(self.conn, self.q, name)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        if entry is None:
            self.say(f"no lane {visible(shown_id(name))} in {self.q}", "refused")
            return
        self.found = name
        self.refresh()
        self.lane.value = name
        self.say(f"lane {visible(shown_id(name))}: {entry['pending']} pending", "ok")

    def facts(self) -> list[tuple[str, object]]:
        return [("queue", self.q), ("lanes", self.total)]

    def _clicked(self, event: dict) -> None:
        group = grids.clicked_id(event, self.frame)
        if group is not None:
            self.lane.value = group
            limit = self.frame["limit"].to_dict()[group]
            if not pd.isna(limit):
                self.limit.value = int(limit)

    def _act(self, what: str, verb: Callable[..., Any], *args: Any, done: str) -> None:
        if not self.writable(f"lane {what}"):
            return
        if self.lane.value is None:
            self.say("pick a lane first", "refused")
            return
        self.attempt(verb, self.conn, self.q, self.lane.value, *args, done=done)
        self.refresh()

    def pause(self) -> None:
        self._act("pause", lanes.pause_lane, done=f"paused lane {self.lane.value}")

    def resume(self) -> None:
        self._act("resume", lanes.resume_lane, done=f"resumed lane {self.lane.value}")

    def set_limit(self) -> None:
        self._act(
            "limit",
            lanes.set_limit,
            self.limit.value,
            done=f"lane {self.lane.value}: at most {self.limit.value:,} in flight",
        )


def _lanes_frame(found: dict[str, dict]) -> pd.DataFrame:
    """The lanes as the grid holds them, in the order given; a count the server holds no
    whole number for (another node wrote it) is <NA>."""
    frame = pd.DataFrame.from_dict(found, orient="index", columns=["pending", "active", "limit", "paused"])
    names = list(frame.index)
    frame.index = pd.Index(names, dtype=repeat.text(names).dtype, name="lane")
    for col in ("pending", "active", "limit"):
        values = frame[col]
        frame[col] = values.astype("int64") if values.notna().all() else values.astype("Int64")
    frame["paused"] = frame["paused"].astype(bool)
    return frame


# the repeatables a refresh of the panel reads and shows, in due order
SHOWN = DEFAULT_LIMIT


class RepeatablesView(Panel):
    def __init__(self, conn: Connection, q: str, owned: bool = False):
        super().__init__(owned=owned)
        self.conn, self.q, self.title = conn, q, q
        self.frame, self.total = pd.DataFrame(), 0
        self.grid = grids.grid(
            _repeat_frame([]),
            index_px=160,
            widths={"every": 90, "next due": 150, "group": 80, "payload": 360, "problem": 160},
        )
        self.grid.on_cell_click(self._clicked)
        self.name = w.Dropdown(options=[], description="repeatable")
        self.run_button = w.Button(description="Run now")
        self.run_button.on_click(lambda _: self.run_now())
        self.summary = w.HTML()
        self.writes(self.run_button)
        self.name.observe(lambda _: self._gate(), names="value")
        self.children = [self.summary, self.grid, w.HBox([self.name, self.run_button]), self.status]
        self.refresh()

    def refresh(self) -> None:
        # a refresh reads the first SHOWN due and counts the rest: an open panel costs
        # the server the same however big the registry
        try:
            found = repeat.registered(self.conn, self.q, limit=SHOWN)
            total = int(self.conn.command("ZCARD", queue_key(self.q, "repeat")))
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        frame = _repeat_frame(found)
        if not frame.equals(self.frame):
            self.frame = frame
            grids.patch(self.grid, frame)
        keep = self.name.value
        self.name.options = [(printable(str(shown_id(n))), n) for n in frame.index]
        if keep in frame.index:
            self.name.value = keep
        self._gate()
        self.total = total
        shown = f" (the first {len(frame):,} due shown)" if total > len(frame) else ""
        self.summary.value = (
            f"<div>{total:,} repeatables of <b>{self.q}</b>{shown}</div>"
            if total
            else f"<div><i>{self.q} has no repeatables</i></div>"
        )

    def facts(self) -> list[tuple[str, object]]:
        return [("queue", self.q), ("repeatables", self.total)]

    def _clicked(self, event: dict) -> None:
        name = grids.clicked_id(event, self.frame)
        if name is not None:
            self.name.value = name

    def _gate(self) -> None:
        self.off(self.run_button, None if self.name.value is not None else "pick a repeatable first")

    def run_now(self) -> None:
        if not self.writable("run now"):
            return
        if self.name.value is None:
            self.say("pick a repeatable first", "refused")
            return
        self.attempt(
            repeat.run_now,
            self.conn,
            self.q,
            self.name.value,
            done=lambda job: f"{self.name.value}: one job now ({job})",
        )
        self.refresh()


def _repeat_frame(found: list[dict]) -> pd.DataFrame:
    # text another node wrote may hold bytes that are not UTF-8: such a column is
    # `object` (repeat.text) and the grid shows each byte as \xNN (grid.shown)
    names = [r["name"] for r in found]
    frame = pd.DataFrame(
        {
            "every": [_every(r["every_ms"]) for r in found],
            "next due": repeat.due_times(r["next_due_ms"] for r in found),
            "group": repeat.text([r["group"] or "" for r in found]),
            "payload": repeat.text([r["payload"] for r in found]),
            "problem": repeat.text([r["problem"] or "" for r in found]),
        },
    )
    frame.index = pd.Index(names, dtype=repeat.text(names).dtype, name="repeatable")
    return frame


def _every(ms: object) -> str:
    if not isinstance(ms, (int, float)):
        return ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{int(ms // size):,}{unit}"
    return f"{int(ms):,}ms"
