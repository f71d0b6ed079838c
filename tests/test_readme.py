"""The README tells the truth: its verbs table is the catalogue's."""

from pathlib import Path

import pytest

from emq_notebook import catalogue

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_readme_verbs_table_is_generated_from_the_catalogue():
    assert catalogue.markdown() in README


def test_readme_opens_with_the_two_commands():
    first = README.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert "emq_notebook.demo" in first[0] and "pytest" in first[1]


def test_readme_acl_line_is_the_one_tested():
    from test_secrets import ACL
    line = " ".join(ACL).replace(ACL[4], ">PASSWORD")
    assert f"`{line}`" in README


# -- "A magic session", executed as written, line by line, on both backends -----------

SESSION_BLOCK = README.split("## A magic session", 1)[1].split("```python", 1)[1].split("```", 1)[0]
# a comment that starts like one of these is the line's printed answer, and is checked
ANSWERS = ("paused ", "no job claimed", "data replaced", "refused:", "resumed ", "using ", "connected:")


@pytest.fixture
def session_on(conn, monkeypatch, ip):
    if conn.label == "embedded fakeredis":
        monkeypatch.delenv("EMQ_URL", raising=False)
    else:
        monkeypatch.setenv("EMQ_URL", conn.label)
    yield conn
    ip.run_line_magic("config", "EMQMagics.default_limit = 1000")


def test_the_magic_session_runs_as_written(ip, session_on, capfd):
    import emq_notebook
    from emq_notebook import magics
    lines = [ln for ln in SESSION_BLOCK.strip().splitlines() if ln.strip()]
    assert len(lines) >= 15
    for line in lines:
        capfd.readouterr()
        result = ip.run_cell(line, store_history=True)
        out = capfd.readouterr().out
        assert result.error_before_exec is None and result.error_in_exec is None, (line, out)
        comment = line.split("  #", 1)[1].strip() if "  #" in line else ""
        if comment.startswith(ANSWERS):
            expected = comment.replace("default: embedded fakeredis (executor=script)",
                                       f"default: {session_on.describe()}")
            assert expected in out, (line, out)
    conn = emq_notebook.current()
    row = emq_notebook.jobs.get_job(conn, "mailers", "j_1")
    assert row["payload"] == '{"to": "ana@example.org"}'
    assert emq_notebook.jobs.get_job_logs(conn, "mailers", "j_1") == [
        "payload mended, see --help of the mailer"]
    assert magics.SESSION.settings.default_limit == 50
    table = ip.run_line_magic("emq", "connections")
    assert table.loc["scratch", "env"] == "staging" and table.loc["scratch", "read_only"]
    assert emq_notebook.current("scratch").read_only and not emq_notebook.current().read_only
    assert ip.user_ns["dead"].empty


def test_the_first_payload_keeps_its_dollar_and_braces(ip, session_on):
    ip.user_ns["promo"] = "EXPANDED"
    ip.run_cell("%emq connect")
    line = next(ln for ln in SESSION_BLOCK.splitlines() if ln.startswith("%emq enqueue"))
    ip.run_cell(line)
    import emq_notebook
    assert '"note": "$5 {promo}"' in emq_notebook.jobs.get_job(emq_notebook.current(), "mailers",
                                                                "j_1")["payload"]


def test_the_settings_paragraph_names_each_setting_and_its_default(ip):
    from emq_notebook.magics import EMQMagics
    text = README.split("**Settings.**", 1)[1].split("**Named connections.**", 1)[0]
    for name, trait in EMQMagics.class_traits(config=True).items():
        default = trait.default_value
        assert f"`{name}` ({default}" in text or f"`{name}` (`{default}`)" in text, name
    assert ip.run_cell("%config EMQMagics").success


def test_the_completion_examples(ip, conn):
    from emq_notebook import jobs, magics
    text = README.split("**Completion.**", 1)[1].split("\n\n", 1)[0]
    assert "`%emq rep` + Tab gives `reprocess`" in text and "`--state d` gives `dead`" in text
    magics.SESSION.conn = conn
    jobs.enqueue(conn, "mailers", "{}", id="j_dead", max_attempts=1)
    jobs.fail(conn, "mailers", jobs.claim(conn, "mailers", 1000)[0], "boom")
    jobs.enqueue(conn, "mailers", "{}", id="j_live")
    assert ip.complete("", "%emq rep", 8)[1] == ["reprocess"]
    line = "%emq reprocess mailers "
    assert ip.complete("", line, len(line))[1] == ["j_dead"]
    line = "%emq jobs mailers --state d"
    assert ip.complete("", line, len(line))[1] == ["dead"]


# -- "Health", executed as written, line by line, on both backends ----------------------

HEALTH_BLOCK = README.split("## Health\n", 1)[1].split("```python", 1)[1].split("```", 1)[0]


def test_the_health_block_runs_as_written(ip, session_on, capfd):
    from emq_notebook.widgets.base import close_all
    lines: list[str] = []
    for ln in HEALTH_BLOCK.strip().splitlines():
        if ln.startswith(" ") and lines:                    # a loop's body runs with its head
            lines[-1] += "\n" + ln
        elif ln.strip():
            lines.append(ln)
    try:
        for line in lines:
            capfd.readouterr()
            result = ip.run_cell(line, store_history=True)
            out = capfd.readouterr().out
            assert result.error_before_exec is None and result.error_in_exec is None, (line, out)
            comment = line.split("  #", 1)[1].strip() if "  #" in line else ""
            if comment.startswith("-> "):                      # the line's value, as written
                assert repr(result.result) == comment[3:], (line, result.result)
            if comment.startswith("prints "):                  # the line's printed answer
                assert comment[len("prints "):] in out, (line, out)
        ns = ip.user_ns
        assert list(ns["lat"].columns) == ["wait_p50", "wait_p95", "wait_p99",
                                           "run_p50", "run_p95", "run_p99", "n"]
        assert ns["fig"].axes[0].get_title() == "mailers: jobs per minute, last 1 h"
        assert ns["view"].running and ns["board"].verdicts == {"mailers": "ok"}
    finally:
        close_all()
