"""%emq health / latency / plot in an in-process IPython shell, and `emq` in the
shell, on both backends."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from emq_notebook import Worker, admin, cli, jobs, magics  # noqa: E402
from emq_notebook.errors import ReadOnly, UnknownQueue, UsageProblem  # noqa: E402


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


def test_health_prints_the_problems_then_sums_the_rest_and_returns_the_frame(emq, conn, capsys):
    stage(conn)
    for i in range(2):
        jobs.enqueue(conn, "later", str(i), delay_ms=3_600_000)  # idle
    h = emq("health")
    lines = capsys.readouterr().out.strip().splitlines()
    assert list(h.index) == ["held", "mail", "later"]  # paused, ok, idle: the most urgent first
    assert lines == [f"held: paused — {h.loc['held', 'why']}", "and 1 ok, 1 idle"]
    assert lines[0].startswith("held: paused — paused by an operator: 1 pending")
    # a queue asked for by name is answered whatever its verdict
    one = emq("health mail")
    assert list(one.index) == ["mail"] and one.loc["mail", "claimed_5m"] == 4
    said = capsys.readouterr().out.strip()
    assert said.startswith("mail: ok — 4 claimed, 4 completed in the last 5 min")


def test_health_and_status_of_a_queue_with_no_key_are_unknown_not_idle(emq, conn, capsys):
    stage(conn)
    for line in ("health mai", "status mai"):
        with pytest.raises(UnknownQueue, match="no queue 'mai' .*did you mean mail"):
            emq(line)
    assert capsys.readouterr().out == ""


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
    assert "held: paused — paused by an operator" in out and "and 1 ok" in out and "verdict" in out
    assert cli.main(["--url", url, "health", "mail"]) == 0
    assert "mail: ok — 4 claimed" in capsys.readouterr().out
    assert cli.main(["--url", url, "health", "mai"]) == 2
    assert "emq: UnknownQueue: no queue 'mai'" in capsys.readouterr().err
    png = tmp_path / "t.png"
    assert cli.main(["--url", url, "plot", "mail", "latency", "--save", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert cli.main(["--url", url, "plot", "mail"]) == 2
    assert "a plot needs a notebook" in capsys.readouterr().err
