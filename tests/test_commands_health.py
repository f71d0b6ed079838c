"""%emq health / latency / plot in an in-process IPython shell, and `emq` in the
shell, on both backends."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from emq_notebook import Worker, admin, cli, jobs, magics  # noqa: E402
from emq_notebook.errors import ReadOnly, UsageProblem  # noqa: E402


@pytest.fixture
def emq(ip, conn):
    magics.SESSION.conn = conn
    return lambda line: ip.run_line_magic("emq", line)


def stage(conn):
    for i in range(4):
        jobs.enqueue(conn, "mail", str(i))
    Worker(conn, "mail", lambda *a: None).run(until_empty=True)
    jobs.enqueue(conn, "held", "x")
    admin.pause(conn, "held")


def test_health_prints_the_verdicts_first_then_returns_the_frame(emq, conn, capsys):
    stage(conn)
    h = emq("health")
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [f"{q}: {h.loc[q, 'verdict']} — {h.loc[q, 'why']}" for q in ("held", "mail")]
    assert lines[0].startswith("held: paused — paused by an operator: 1 pending")
    assert lines[1].startswith("mail: ok — 4 claimed, 4 completed in the last 5 min")
    one = emq("health mail")
    assert list(one.index) == ["mail"] and one.loc["mail", "claimed_5m"] == 4


def test_health_of_an_empty_server_says_so(emq, capsys):
    assert emq("health").empty
    assert capsys.readouterr().out.strip() == "no queue on this server"


def test_latency_and_metrics_verbs(emq, conn):
    stage(conn)
    lat = emq("latency mail --since 1h")
    assert isinstance(lat, pd.DataFrame) and lat["n"].sum() == 4
    m = emq("metrics mail")
    assert list(m.columns) == ["claimed", "completed", "failed"] and m["claimed"].sum() == 4


def test_plot_returns_a_figure_shown_as_an_image(emq, conn, ip):
    stage(conn)
    fig = emq("plot mail")
    assert isinstance(fig, Figure) and fig.axes[0].get_title() == "mail: jobs per minute, last 1 h"
    # IPython now formats a figure as a PNG (base64; a kernel enables that formatter)
    to_png = ip.display_formatter.formatters["image/png"].lookup(fig)
    assert to_png(fig).startswith("iVBOR")
    fig = emq("plot mail latency --since 30m")
    assert fig.get_suptitle() == "mail: wait and run time, last 30 min"


def test_plot_refuses_a_bad_choice_and_a_bad_window(emq):
    with pytest.raises(UsageProblem):
        emq("plot mail speed")
    with pytest.raises(UsageProblem):
        emq("plot mail --since soon")


def test_the_health_verbs_work_on_a_read_only_session(ip, conn, connect_as, backend):
    stage(conn)
    ro = connect_as()
    ro.read_only = True
    magics.SESSION.conn = ro
    assert ip.run_line_magic("emq", "health mail").loc["mail", "verdict"] == "ok"
    assert isinstance(ip.run_line_magic("emq", "plot mail"), Figure)
    with pytest.raises(ReadOnly):
        ip.run_line_magic("emq", "pause mail")


def test_the_shell_prints_health_and_saves_a_plot(conn, backend, valkey, tmp_path, capsys):
    if backend != "valkey":
        pytest.skip("the shell reaches a server by URL")
    stage(conn)
    url = f"redis://127.0.0.1:{valkey.port}/0"
    assert cli.main(["--url", url, "health"]) == 0
    out = capsys.readouterr().out
    assert "mail: ok — 4 claimed" in out and "verdict" in out
    png = tmp_path / "t.png"
    assert cli.main(["--url", url, "plot", "mail", "latency", "--save", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert cli.main(["--url", url, "plot", "mail"]) == 2
    assert "a plot needs a notebook" in capsys.readouterr().err
