"""The plots, checked on their artists (axes, lines, bars, titles, labels), not on
pixels; drawn with the Agg backend on both backends."""

from __future__ import annotations

import io

import matplotlib
import pytest
from helpers import worked

matplotlib.use("Agg")

from matplotlib.dates import DateFormatter, num2date  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from emq_notebook import admin, frames, jobs, plots  # noqa: E402
from emq_notebook.errors import UsageProblem  # noqa: E402

Q = "mail"


def rendered(fig: Figure) -> Figure:
    """Draw it once (Agg), as a notebook would, so a broken artist raises here."""
    fig.savefig(io.BytesIO(), format="png")
    return fig


def lines_by_label(ax) -> dict:
    return {line.get_label(): line for line in ax.get_lines()}


def staged(conn, failing=1, total=6):
    worked(conn, Q, total, failing)


def test_throughput_draws_claimed_completed_failed_per_minute(conn):
    staged(conn, failing=2, total=7)
    fig = rendered(plots.throughput(conn, Q, since="30m"))
    (ax,) = fig.axes
    assert ax.get_title() == f"{Q}: jobs per minute, last 30 min"
    assert ax.get_ylabel() == "jobs per minute"
    assert ax.get_xlabel() == "time (UTC); the grey minute is not over yet"
    assert isinstance(ax.xaxis.get_major_formatter(), DateFormatter)
    lines = lines_by_label(ax)
    kinds = ("claimed", "completed", "failed")
    # the unfinished minute is its own dotted line, so it never reads as a drop
    assert {f"_{k} so far" for k in kinds} <= set(lines) <= {*kinds, *(f"_{k} so far" for k in kinds)}
    m = frames.metrics(conn, Q)

    def drawn(kind):
        # each minute's count drawn once (a step line repeats its last point to close it)
        done = lines[kind].get_ydata()[:-1] if kind in lines else []
        return [*done, lines[f"_{kind} so far"].get_ydata()[0]]

    for kind in kinds:
        assert sum(drawn(kind)) == m[kind].sum() and max(drawn(kind)) == m[kind].max()
    # both failures are drawn, in one minute or split over two if the run crossed one
    assert sum(drawn("failed")) == 2
    # the x axis spans the window: 30 minutes and the current one
    lo, hi = (num2date(x) for x in ax.get_xlim())
    assert 30 * 60 <= (hi - lo).total_seconds() <= 32 * 60


def test_throughput_of_a_quiet_queue_says_so(conn):
    fig = rendered(plots.throughput(conn, "quiet", since="2h"))
    (ax,) = fig.axes
    assert ax.get_title() == "quiet: jobs per minute, last 2 h"
    assert any("no job claimed" in t.get_text() for t in ax.texts)


def test_latency_draws_wait_and_run_percentiles(conn):
    staged(conn, failing=0, total=5)
    fig = rendered(plots.latency(conn, Q))
    wait_ax, run_ax = fig.axes
    assert fig.get_suptitle() == f"{Q}: wait and run time, last 1 h"
    assert wait_ax.get_title().startswith("wait: from ready (enqueued or due) until a worker claimed it")
    assert run_ax.get_title() == "run: from claimed until completed or failed"
    assert wait_ax.get_ylabel() == run_ax.get_ylabel() == "ms"
    assert run_ax.get_xlabel() == "time (UTC)"
    lat = frames.latency(conn, Q)
    for ax, kind in ((wait_ax, "wait"), (run_ax, "run")):
        lines = lines_by_label(ax)
        assert set(lines) == {"median (p50)", "p95", "p99"}
        assert list(lines["p95"].get_ydata()) == list(lat[f"{kind}_p95"])
        assert not ax.texts  # measured: no "no job measured" note


def test_latency_of_an_unmeasured_queue_says_so(conn):
    fig = rendered(plots.latency(conn, "quiet", since="15m"))
    assert all(any("no job measured in the last 15 min" in t.get_text() for t in ax.texts) for ax in fig.axes)


def test_overview_has_a_bar_per_queue_coloured_by_verdict(conn):
    staged(conn, failing=3, total=4)  # mail: failing
    for i in range(3):
        jobs.enqueue(conn, "held", str(i))
    admin.pause(conn, "held")  # held: paused
    fig = rendered(plots.overview(conn))
    backlog_ax, failing_ax = fig.axes
    assert fig.get_suptitle().startswith("every queue: backlog and failure rate")
    assert backlog_ax.get_xlabel() == "pending jobs"
    assert failing_ax.get_title() == "failure rate, last 5 min"
    h = frames.health(conn)
    bars = {
        label.get_text(): bar
        for label, bar in zip(backlog_ax.get_yticklabels(), backlog_ax.patches, strict=True)
    }
    assert set(bars) == set(h.index) == {"held", Q}
    assert bars["held"].get_width() == 3
    # the two panels share the queue axis (its labels are on the left one)
    rates = {
        label.get_text(): bar.get_width()
        for label, bar in zip(backlog_ax.get_yticklabels(), failing_ax.patches, strict=True)
    }
    assert rates[Q] == 75.0
    colour = {bar: matplotlib.colors.to_hex(b.get_facecolor()) for bar, b in bars.items()}
    assert colour == {q: plots.VERDICT_COLOURS[h.loc[q, "verdict"]] for q in h.index}
    assert {t.get_text() for t in failing_ax.texts} == {"paused", "failing"}


def test_overview_of_an_empty_server(conn):
    fig = rendered(plots.overview(conn))
    assert any("no queue" in t.get_text() for t in fig.axes[0].texts)


@pytest.mark.parametrize("since", ["soon", "30s", "0m"])
def test_a_bad_window_is_refused_before_any_io(since):
    import emq_notebook as emq

    conn = emq.connect("redis://127.0.0.1:1/0")  # nothing listens there
    with pytest.raises(UsageProblem):
        plots.throughput(conn, Q, since=since)
