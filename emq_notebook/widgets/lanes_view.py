"""LanesView and RepeatablesView: a queue's lanes (pending, in flight, limit,
paused) with lane pause / resume / limit, and its repeatables with Run now.

Both are tables read in one pipelined call each; a row click picks the lane or
the repeatable the buttons act on. Run now is `repeat.run_now`: one job from the
repeatable now, its cadence kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as w
import pandas as pd

from .. import lanes, repeat
from ..connector import Connection
from ..decoding import printable, shown_id
from ..defaults import DEFAULT_LIMIT
from ..errors import EMQError
from ..keyspace import queue_key
from . import grid as grids
from .base import Panel

LANE_COLOURS = {
    "paused": "cell.value == 'yes' ? '#fff8c5' : 'white'",
    "active": "cell.value >= cell.metadata.data['limit'] && cell.value > 0 ? '#ddf4ff' : 'white'",
}


class LanesView(Panel):
    def __init__(self, conn: Connection, q: str, owned: bool = False):
        super().__init__(owned=owned)
        self.conn, self.q, self.title = conn, q, q
        self.frame = pd.DataFrame()
        self.grid = grids.grid(_lanes_frame({}), colours=LANE_COLOURS, index_px=160)
        self.grid.on_cell_click(self._clicked)
        self.lane = w.Dropdown(options=[], description="lane")
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
        self.children = [
            self.summary,
            self.grid,
            w.HBox([self.lane, self.pause_button, self.resume_button, self.limit, self.limit_button]),
            self.status,
        ]
        self.refresh()

    def refresh(self) -> None:
        try:
            found = lanes.lanes(self.conn, self.q)
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        frame = _lanes_frame(found)
        if not frame.equals(self.frame):
            self.frame = frame
            grids.patch(self.grid, frame)
        keep = self.lane.value
        self.lane.options = list(frame.index)
        if keep in frame.index:
            self.lane.value = keep
        self.summary.value = (
            f"<div>{len(frame):,} lanes of <b>{self.q}</b></div>"
            if len(frame)
            else f"<div><i>{self.q} has no lanes (no grouped jobs yet)</i></div>"
        )

    def facts(self) -> list[tuple[str, object]]:
        return [("queue", self.q), ("lanes", len(self.frame))]

    def _clicked(self, event: dict) -> None:
        group = grids.clicked_id(event, self.frame)
        if group is not None:
            self.lane.value = group
            self.limit.value = int(self.frame["limit"].to_dict()[group])

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
    frame = pd.DataFrame.from_dict(found, orient="index", columns=["pending", "active", "limit", "paused"])
    frame.index.name = "lane"
    for col in ("pending", "active", "limit"):
        frame[col] = frame[col].astype("int64")
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
