"""MetricsView: a queue's throughput and latency plots, redrawn every few seconds.

One background refresh per view (named `emq-metrics-<q>`), with a Stop button and
a visible "last refreshed" time. The plots go into the view's own Output widget
as PNG images (drawn off the kernel's thread, no pyplot), so a refresh never
writes into whichever cell runs at the time. The refresh stops when the view is
stopped or closed, when a MetricsView for the same queue and connection is built
again, and at interpreter exit. A saved notebook shows the last plots and
numbers (the static fallback).
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any

import ipywidgets as w
from matplotlib.figure import Figure

from .. import frames, plots
from ..checks import duration_ms
from ..connector import Connection
from ..errors import EMQError
from ..health import ms_text
from .base import Panel, interval, table
from .values import clock, zone


def png(fig: Figure) -> str:
    """The figure as a base64 PNG (the way a notebook stores an image)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _last(values: Any) -> float:
    measured = values.dropna()
    return float(measured.iloc[-1]) if len(measured) else float("nan")


class MetricsView(Panel):
    """`MetricsView(conn, q, refresh_every=5.0, since="1h", auto=True)`: reads only."""

    def __init__(
        self, conn: Connection, q: str, refresh_every: float = 5.0, since: str = "1h", auto: bool = True
    ):
        super().__init__()
        self.conn, self.q, self.title = conn, q, q
        self.refresh_every = interval(refresh_every)
        duration_ms(since, "since", least=60_000)
        self.since = since
        self.refreshes = 0
        self.refreshed_at: str | None = None
        self.images: list[tuple[str, str]] = []  # (title, base64 PNG)
        self.summary: dict[str, Any] = {}
        self.out = w.Output()
        self.refreshed = w.HTML("<i>not refreshed yet</i>")
        self.numbers = w.HTML()
        self.stop_button = w.Button(description="Stop")
        self.stop_button.on_click(lambda _: self.toggle())
        self.refresh_button = w.Button(description="Refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.every(self.refresh_every, f"emq-metrics-{q}")
        self.children = [
            w.HTML(f"<b>metrics of {html.escape(q)}</b> · last {html.escape(since)}"),
            w.HBox([self.stop_button, self.refresh_button, self.refreshed]),
            self.numbers,
            self.out,
            self.status,
        ]
        self._register(q)
        self.refresh()
        if auto:
            self.start()
        else:
            self.show_running()

    # -- reading ------------------------------------------------------------------
    def refresh(self) -> None:
        """Draw both plots again and say when; a lost server or a foreign key is a line
        in the status, and the refresh keeps trying."""
        try:
            figs = [
                plots.throughput(self.conn, self.q, since=self.since, tz=zone()),
                plots.latency(self.conn, self.q, since=self.since, tz=zone()),
            ]
            m = frames.metrics(self.conn, self.q, since_ms=duration_ms(self.since, "since"))
            lat = frames.latency(self.conn, self.q, since_ms=duration_ms(self.since, "since"))
        except EMQError as exc:
            self.say(f"error: {exc}", "error")
            return
        self.images = [(self._title(f), png(f)) for f in figs]
        self.out.outputs = tuple(
            {"output_type": "display_data", "metadata": {}, "data": {"image/png": data, "text/plain": title}}
            for title, data in self.images
        )
        self.summary = {
            **{k: int(m[k].sum()) for k in ("claimed", "completed", "failed")},
            **{
                f"{kind} p95, last minute measured": ms_text(_last(lat[f"{kind}_p95"]))
                for kind in ("wait", "run")
            },
        }
        self.numbers.value = table(self.summary, (f"last {self.since}", ""))
        self.refreshes += 1
        self.refreshed_at = clock()
        self.show_running()

    @staticmethod
    def _title(fig: Figure) -> str:
        return fig.get_suptitle() or fig.axes[0].get_title()

    def show_running(self) -> None:
        self.stop_button.description = "Stop" if self.running else "Start"
        when = f"last refreshed {self.refreshed_at}" if self.refreshed_at else "not refreshed yet"
        how = f"every {self.refresh_every:g}s" if self.running else "stopped"
        self.refreshed.value = f"<small>{when} · {how}</small>"

    def facts(self) -> list[tuple[str, object]]:
        return [
            ("queue", self.q),
            ("window", f"last {self.since}"),
            ("last refreshed", self.refreshed_at or "never"),
            ("auto-refresh", f"every {self.refresh_every:g}s" if self.running else "off"),
        ]

    def static_html(self) -> str:
        # the saved notebook shows the last plots too
        imgs = "".join(
            f'<div><img alt="{html.escape(t)}" src="data:image/png;base64,{d}"/></div>'
            for t, d in self.images
        )
        return super().static_html().removesuffix("</div>") + imgs + "</div>"
