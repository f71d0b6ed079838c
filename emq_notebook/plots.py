"""Plots an operator reads in a second: throughput and latency of a queue over time,
and every queue's backlog and failure rate side by side.

Each function returns a matplotlib `Figure` (made without pyplot, so nothing is
kept in a global figure list and a background refresh can draw safely); in a
notebook it shows as an image. Reads only, through `frames`: the metrics hashes,
the latency histograms and `frames.health`, never a job's row.
"""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.dates import AutoDateLocator, DateFormatter, date2num
from matplotlib.figure import Figure

from . import frames, health
from .checks import duration_ms
from .connector import Connection
from .keyspace import check_name

# one colour per meaning, the same in every plot and in HealthView
COLOURS = {
    "claimed": "#1f77b4",
    "completed": "#2ca02c",
    "failed": "#d62728",
    "p50": "#1f77b4",
    "p95": "#ff7f0e",
    "p99": "#d62728",
}
# one colour a verdict, in severity order, the same in every plot, grid and chip: the
# strong one for bars and badges, its tint for a cell's background
VERDICT_COLOURS = {
    "failing": "#cf222e",
    "stuck": "#bc4c00",
    "growing": "#9a6700",
    "dead_letters": "#8250df",
    "paused": "#0969da",
    "ok": "#1a7f37",
    "idle": "#6e7781",
}
VERDICT_TINTS = {
    "failing": "#ffcecb",
    "stuck": "#ffd8b5",
    "growing": "#fff1b3",
    "dead_letters": "#e8dbff",
    "paused": "#ddf4ff",
    "ok": "#dafbe1",
    "idle": "#f6f8fa",
}


def verdict_chip(verdict: str, count: int | None = None) -> str:
    """A verdict as a badge in its colour (`stuck`, or `12 stuck` with a count), for HTML."""
    colour = VERDICT_COLOURS.get(verdict, VERDICT_COLOURS["idle"])
    words = verdict.replace("_", " ")
    text = words if count is None else f"{count:,} {words}"
    return (
        f'<span style="display:inline-block;background:{colour};color:white;border-radius:10px;'
        f'padding:0 8px;margin:1px 4px 1px 0;white-space:nowrap">{html.escape(text)}</span>'
    )


_LATENCY_LINES = (("p50", "median (p50)"), ("p95", "p95"), ("p99", "p99"))
MINUTE = pd.Timedelta(minutes=1)


def _window(conn: Connection, since: str) -> tuple[pd.Timestamp, pd.Timestamp, str]:
    """(start, end, the window in words) of the last `since` by the server's clock."""
    span = duration_ms(since, "since", least=60_000)
    end = pd.Timestamp(conn.server_ms(), unit="ms", tz="UTC")
    return end - pd.Timedelta(milliseconds=span), end, f"last {_words(span)}"


def _words(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return health.ago(ms / 1000)


def _zone(tz: dt.tzinfo | None) -> dt.tzinfo:
    """The zone a time axis is drawn in: `tz`, else this machine's."""
    if tz is not None:
        return tz
    local = dt.datetime.now().astimezone().tzinfo
    return local if local is not None else dt.UTC


def _time_axis(ax: Axes, start: pd.Timestamp, end: pd.Timestamp, tz: dt.tzinfo) -> None:
    # to the end of the current minute, so its bucket is drawn whole
    ax.set_xlim(float(date2num(start.floor("min"))), float(date2num(end.floor("min") + MINUTE)))
    ax.xaxis.set_major_locator(AutoDateLocator(minticks=3, maxticks=7, tz=tz))
    ax.xaxis.set_major_formatter(DateFormatter("%H:%M", tz=tz))
    ax.grid(True, alpha=0.3)


def _zone_name(tz: dt.tzinfo, at: pd.Timestamp) -> str:
    return at.tz_convert(tz).strftime("%Z") or str(tz)


def _nothing(ax: Axes, text: str) -> None:
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#7f7f7f")


def _minutes(start: pd.Timestamp, end: pd.Timestamp) -> pd.DatetimeIndex:
    index = pd.date_range(start.floor("min"), end.floor("min"), freq="min")
    index.name = "minute"
    return index


def throughput(conn: Connection, q: str, since: str = "1h", tz: dt.tzinfo | None = None) -> Figure:
    """Jobs claimed, completed and failed per minute over the last `since` (`1h`,
    `30m`, `2d`: at least a minute), the time axis in zone `tz` (this machine's unless
    given). A minute with nothing is drawn as zero; the current minute, not over yet,
    is drawn dotted on a grey band ("this minute so far"), so a count that is still
    growing does not read as a drop."""
    check_name(q)
    tz = _zone(tz)
    start, end, window = _window(conn, since)
    m = frames.metrics(conn, q)
    m = m[m.index >= start.floor("min")].reindex(_minutes(start, end), fill_value=0)
    done, now = m.iloc[:-1], m.iloc[-1:]
    # each finished minute's count is drawn across its minute: the last step ends with it
    steps = pd.concat([done, done.iloc[-1:].set_axis(done.index[-1:] + MINUTE)]) if len(done) else done
    current = pd.concat([now, now.set_axis(now.index + MINUTE)])
    # fixed margins, not a layout engine: a live view redraws this every few seconds
    fig = Figure(figsize=(8, 3.6))
    fig.subplots_adjust(left=0.08, right=0.96, top=0.9, bottom=0.15)
    ax = fig.add_subplot()
    for kind, style in (("completed", "-"), ("failed", "-"), ("claimed", "--")):
        if len(steps):
            ax.plot(
                pd.DatetimeIndex(steps.index).to_pydatetime(),
                steps[kind].to_numpy(),
                label=kind,
                color=COLOURS[kind],
                drawstyle="steps-post",
                linewidth=1.6,
                linestyle=style,
            )
        ax.plot(
            pd.DatetimeIndex(current.index).to_pydatetime(),
            current[kind].to_numpy(),
            label=f"_{kind} so far",
            color=COLOURS[kind],
            drawstyle="steps-post",
            linewidth=1.6,
            linestyle=":",
            alpha=0.7,
        )
    minute = now.index[0]
    ax.axvspan(
        float(date2num(minute)), float(date2num(minute + MINUTE)), color="#eaeef2", alpha=0.8, zorder=0
    )
    ax.set_title(f"{q}: jobs per minute, {window}")
    ax.set_ylabel("jobs per minute")
    ax.set_xlabel(f"time ({_zone_name(tz, end)}); the grey minute is not over yet")
    ax.set_ylim(bottom=0)
    _time_axis(ax, start, end, tz)
    if not m.to_numpy().any():
        _nothing(ax, f"no job claimed, completed or failed in the {window}")
    ax.legend(loc="upper left", frameon=False)
    return fig


# a latency axis in the unit its largest value reads best in: (unit, ms in one, below)
_UNITS = (("ms", 1, 2_000), ("s", 1_000, 120_000), ("min", 60_000, 7_200_000), ("h", 3_600_000, None))


def _unit(largest: float) -> tuple[str, float]:
    for unit, size, below in _UNITS:
        if below is None or not largest >= below:
            return unit, size
    return "h", 3_600_000


def latency(conn: Connection, q: str, since: str = "1h", tz: dt.tzinfo | None = None) -> Figure:
    """Two panels over the last `since`: how long jobs waited for a worker (from ready:
    enqueued, or due for a delayed or retried job, until claimed) and how long they
    ran (claimed until completed or failed), each as its p50, p95 and p99 per minute,
    in the unit their largest value reads best in (ms, s, min or h)."""
    check_name(q)
    tz = _zone(tz)
    start, end, window = _window(conn, since)
    lat = frames.latency(conn, q)
    lat = lat[lat.index >= start.floor("min")]
    fig = Figure(figsize=(8, 5.2))
    fig.subplots_adjust(left=0.09, right=0.96, top=0.88, bottom=0.1, hspace=0.35)
    wait_ax, run_ax = fig.subplots(2, 1, sharex=True)
    fig.suptitle(f"{q}: wait and run time, {window}")
    for ax, kind, title in (
        (wait_ax, "wait", "wait: from ready (enqueued or due) until a worker claimed it"),
        (run_ax, "run", "run: from claimed until completed or failed"),
    ):
        largest = lat[[f"{kind}_{p}" for p, _ in _LATENCY_LINES]].max().max() if len(lat) else 0.0
        unit, size = _unit(float(largest) if largest == largest else 0.0)
        for p, label in _LATENCY_LINES:
            values = lat[f"{kind}_{p}"] / size
            # a minute's percentile sits in the middle of its minute
            at = (pd.DatetimeIndex(values.index) + pd.Timedelta(seconds=30)).to_pydatetime()
            ax.plot(
                at, values.to_numpy(), marker="o", markersize=4, label=label, color=COLOURS[p], linewidth=1.4
            )
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        _time_axis(ax, start, end, tz)
        if not lat[f"{kind}_p50"].notna().any():
            _nothing(ax, f"no job measured in the {window}")
        ax.legend(loc="upper left", frameon=False)
    run_ax.set_xlabel(f"time ({_zone_name(tz, end)})")
    return fig


def overview(conn: Connection) -> Figure:
    """Every queue at once: its backlog (pending jobs) and its failure rate over the
    last 5 minutes, each bar coloured by the queue's health verdict."""
    h = frames.health(conn)
    fig = Figure(figsize=(9, 1.6 + 0.45 * max(len(h), 1)), layout="constrained")
    backlog_ax, failing_ax = fig.subplots(1, 2, sharey=True)
    fig.suptitle("every queue: backlog and failure rate (colour: verdict)")
    names = list(h.index)[::-1]  # the first queue on top
    colours = [VERDICT_COLOURS[v] for v in h["verdict"]][::-1]
    backlog_ax.barh(names, h["pending"].to_numpy()[::-1], color=colours)
    backlog_ax.set_title("backlog", fontsize="medium")
    backlog_ax.set_xlabel("pending jobs")
    rates = (h["failure_rate_5m"].fillna(0) * 100).to_numpy()[::-1]
    failing_ax.barh(names, rates, color=colours)
    failing_ax.set_title("failure rate, last 5 min", fontsize="medium")
    failing_ax.set_xlabel("% of finished jobs that failed")
    failing_ax.set_xlim(0, 100)
    for ax in (backlog_ax, failing_ax):
        ax.grid(True, axis="x", alpha=0.3)
    for name, verdict in zip(names, list(h["verdict"])[::-1], strict=True):
        failing_ax.annotate(
            verdict,
            (100, name),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            annotation_clip=False,
            color=VERDICT_COLOURS[verdict],
        )
    if h.empty:
        _nothing(backlog_ax, "no queue on this server")
    return fig


def show_in_notebook(shell: Any = None) -> None:
    """Let a bare `Figure` display as an image in IPython (pyplot does this when
    imported; these figures are made without it). A shell that already shows
    figures some way (`%matplotlib inline`, an svg or retina setting) is left as it
    is. Does nothing outside IPython."""
    from IPython import get_ipython
    from IPython.core.pylabtools import select_figure_formats

    shell = shell or get_ipython()
    if shell is None:
        return
    for formatter in shell.display_formatter.formatters.values():
        try:
            formatter.lookup_by_type(Figure)
            return
        except KeyError:
            continue
    select_figure_formats(shell, {"png"})
