"""The health verbs of `%emq` / `emq`: `health`, `latency` and `plot`. All read only.

`%emq health` prints a line for each queue with a problem (its verdict and why,
most urgent first) and sums the rest in one line ("and 180 ok, 5 idle"); `%emq
health QUEUE` prints that queue's line, and a name with no key is `UnknownQueue`.
Both return the `frames.health` frame; `%emq latency QUEUE` the wait and run percentiles by
minute; `%emq plot QUEUE [throughput|latency]` a matplotlib figure (in the shell,
`--save FILE.png` writes it instead).
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

import pandas as pd

from .. import frames, health
from ..errors import BadInput, EMQError
from ..grammar import duration
from ..registry import arg, opt, verb
from .session import QUEUE, Session

PLOTS = ("throughput", "latency")


@verb("health", "every queue's verdict and why, the most urgent first", arg("queue", nargs="?"))
def _health(s: Session, ns: Namespace) -> pd.DataFrame:
    look = health.look(s.conn, None if ns.queue is None else [ns.queue])
    h = look.frame
    if h.empty:
        s.say("no queue on this server")
    # a named queue is answered whatever its verdict; a list, by its problems
    for line in health.verdict_lines(h) if ns.queue else health.report_lines(h):
        s.say(line)
    for q in look.notes:
        s.say(f"{q}: {look.note(q)}")
    return h


@verb(
    "latency",
    "wait and run percentiles (p50, p95, p99, ms) per minute",
    QUEUE,
    opt("--since", type=duration, help="e.g. 1h"),
)
def _latency(s: Session, ns: Namespace) -> pd.DataFrame:
    return frames.latency(s.conn, ns.queue, since_ms=ns.since)


@verb(
    "plot",
    "a queue's throughput (the default) or latency over time, as a figure",
    QUEUE,
    arg("what", nargs="?", choices=list(PLOTS), default="throughput"),
    opt("--since", default="1h", help="the window, e.g. 30m, 1h, 2d (default 1h)"),
    opt("--save", metavar="FILE", help="write the figure to FILE (.png, .svg, .pdf)"),
)
def _plot(s: Session, ns: Namespace) -> Any:
    """Refuses (`BadInput`) a --save FILE that cannot be written: a missing directory,
    no permission, a format matplotlib does not write."""
    from .. import plots  # matplotlib, loaded by the first plot

    draw = plots.throughput if ns.what == "throughput" else plots.latency
    fig = draw(s.conn, ns.queue, since=ns.since)
    if ns.save:
        try:
            fig.savefig(ns.save)
        except (OSError, ValueError) as exc:
            raise BadInput(f"cannot save the {ns.what} of {ns.queue} to {ns.save}: {exc}") from None
        s.say(f"saved the {ns.what} of {ns.queue} to {ns.save}")
        return None
    try:
        return s.widget(lambda: _shown(fig))
    except EMQError:
        raise EMQError("a plot needs a notebook: use %emq plot in Jupyter, or --save FILE.png here") from None


def _shown(fig: Any) -> Any:
    """The figure, with IPython told to show a figure as an image."""
    from .. import plots

    plots.show_in_notebook()
    return fig
