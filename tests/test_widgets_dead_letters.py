"""DeadLetterPanel (emq_notebook/widgets/dead_letters.py) driven in Python, on both backends:
foreign text shown escaped, Reprocess all and Remove previewed asking before they act, read-
only sessions; selected and all in bulk, the buttons restating their count; a summary
that counts the whole set; and its buttons through a whole triage
(filter, the errors view, a signature chosen, Preview, then Reprocess / Remove / Move /
Export previewed acting on exactly the previewed ids)."""

from __future__ import annotations

import pytest
from helpers import dump, failed, server_for, server_url
from mailq import K, Q, kill, smtp_dead
from panels import shown, unsendable

import emq_notebook as emq
from emq_notebook import admin, jobs
from emq_notebook.widgets import DeadLetterPanel
from emq_notebook.widgets.base import plain

Q_panels = "mail"
Q_triage = "dlq"
K_triage = f"emq:{{{Q_triage}}}:"
WRITING_triage = [
    "reprocess_preview_button",
    "remove_preview_button",
    "move_preview_button",
    "reprocess_button",
    "remove_button",
    "reprocess_all_button",
]

# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.


def test_a_nul_in_an_error_shows_escaped_in_the_dead_letter_panel(conn):
    from emq_notebook.widgets import DeadLetterPanel

    smtp_dead(conn, 2)
    conn.client.hset(K + "job:j_01", "last_error", "SMTP\x00 boom\x1b[2J")
    panel = DeadLetterPanel(conn, Q)
    try:
        shown = [*panel.signature.options, *(label for label, _ in panel.select.options)]
        shown += [panel.errors_view.value, panel.summary.value]
        assert not any("\x00" in s or "\x1b" in s for s in shown)
        assert "SMTP\\x00 boom\\x1b[<num>J" in panel.signature.options
        panel.signature.value = "SMTP\\x00 boom\\x1b[<num>J"
        panel.preview_button.click()
        assert panel.previewed == ["j_01"]
    finally:
        panel.close()


# -- 3. the DeadLetterPanel asks before a bulk write, and honours the rate ------------------


@pytest.fixture
def panel_on(conn):
    """A DeadLetterPanel on the same server, its connection labelled env production,
    asking above 2 jobs (`confirm_above`, as `%emq reprocess --all-dead` asks for --yes)."""
    import emq_notebook as emq
    from emq_notebook.widgets import DeadLetterPanel

    if conn.label == "embedded fakeredis":
        labelled = emq.connect(embedded="fake", env="production")
    else:
        labelled = emq.connect(conn.label, env="production")
    made = []

    def make():
        made.append(DeadLetterPanel(labelled, Q, confirm_above=2))
        return made[-1]

    yield make
    for panel in made:
        panel.close()


def test_reprocess_all_asks_the_count_and_the_connection_and_moves_nothing_before_confirm(conn, panel_on):
    smtp_dead(conn, 6)
    panel = panel_on()
    before = dump(conn)
    panel.reprocess_all_button.click()
    assert dump(conn) == before
    asked = panel.confirmation.text.value
    assert "Reprocess <b>6</b> dead jobs of mailq?" in asked
    assert "env production · connected: " in asked and conn.label.split("/")[0] in asked
    assert "As fast as it goes" in asked
    panel.confirmation.cancel_button.click()
    assert dump(conn) == before and panel.confirmation.text.value == ""
    assert panel.status_text == "cancelled; nothing done"
    panel.reprocess_all_button.click()
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "reprocessed 6 dead jobs"
    assert conn.client.zcard(K + "dead") == 0 and conn.client.zcard(K + "pending") == 6


def test_reprocess_all_moves_at_the_rate_it_stated(conn, panel_on, monkeypatch):

    calls = []
    real = admin.reprocess_dead

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(admin, "reprocess_dead", spy)
    smtp_dead(conn, 4)
    panel = panel_on()
    panel.rate.value = 400
    panel.reprocess_all_button.click()
    assert "At most 400 a second." in panel.confirmation.text.value
    panel.rate.value = 0  # changed after the question: the question's rate holds
    panel.confirmation.confirm_button.click()
    assert [(c["rate"], c["limit"]) for c in calls] == [(400, 4)]
    assert panel.status_text == "reprocessed 4 dead jobs" and conn.client.zcard(K + "dead") == 0


def test_reprocess_all_asks_again_when_more_died_after_the_question(conn, panel_on):
    smtp_dead(conn, 3)
    panel = panel_on()
    panel.reprocess_all_button.click()
    kill(conn, "j_late", "SMTP 550 mailbox 9 unavailable")
    before = dump(conn)
    panel.confirmation.confirm_button.click()
    assert dump(conn) == before
    assert panel.status_text == "not done: 4 jobs now; confirm again"
    assert "The count changed (the question said 3). Reprocess <b>4</b>" in panel.confirmation.text.value
    panel.confirmation.confirm_button.click()
    assert conn.client.zcard(K + "dead") == 0


def test_reprocess_all_moves_what_is_left_when_fewer_remain_than_it_stated(conn, panel_on):
    ids = smtp_dead(conn, 3)
    panel = panel_on()
    panel.reprocess_all_button.click()
    jobs.reprocess_job(conn, Q, ids[0])  # another operator, meanwhile
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "reprocessed 2 dead jobs"
    assert conn.client.zcard(K + "dead") == 0


def test_remove_previewed_asks_the_count_and_removes_nothing_before_confirm(conn, panel_on):
    ids = smtp_dead(conn, 4)
    panel = panel_on()
    panel.error_glob.value = "SMTP 550 mailbox [12] *"
    panel.preview_button.click()
    assert panel.previewed == ids[1:3]
    before = dump(conn)
    panel.remove_preview_button.click()
    assert dump(conn) == before
    assert "Remove <b>2</b> previewed dead jobs of mailq?" in panel.confirmation.text.value
    assert "env production" in panel.confirmation.text.value
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "remove previewed: 2 removed"
    assert conn.client.zrange(K + "dead", 0, -1) == [ids[0], ids[3]]
    assert panel.previewed == [] and panel.remove_preview_button.disabled


def test_a_new_preview_closes_the_open_question(conn, panel_on):
    smtp_dead(conn, 2)
    panel = panel_on()
    panel.preview_button.click()
    panel.remove_preview_button.click()
    panel.preview_button.click()
    assert panel.confirmation.asked is None
    before = dump(conn)
    panel.confirmation.confirm_button.click()
    assert dump(conn) == before


def test_a_read_only_panel_greys_the_confirm_button_out(conn):
    import emq_notebook as emq
    from emq_notebook.widgets import DeadLetterPanel

    smtp_dead(conn, 2)
    url = None if conn.label == "embedded fakeredis" else conn.label
    ro = emq.connect(url, embedded="fake" if url is None else None, read_only=True)
    panel = DeadLetterPanel(ro, Q)
    try:
        assert panel.confirmation.confirm_button.disabled
    finally:
        panel.close()


# -- foreign bytes in the list, a summary of the whole set


def test_a_dead_letter_with_undecodable_bytes_is_listed_as_escapes(conn, ip):
    jid = failed(conn, Q_panels, 1)[0]
    conn.client.execute_command("HSET", f"emq:{{{Q_panels}}}:job:{jid}", "last_error", b"bad \xfe byte")
    panel = DeadLetterPanel(conn, Q_panels)
    assert panel.select._options_labels == (f"{jid} — bad \\xfe byte (failures 1)",)
    assert "bad \\xfe byte" in shown(ip, panel)["text/plain"] and unsendable(panel) == []


def test_the_dead_letter_summary_counts_the_whole_set_not_the_page(conn, ip):
    failed(conn, Q_panels, 3, error="SMTP 550")
    failed(conn, Q_panels, 2, error="timeout")
    panel = DeadLetterPanel(conn, Q_panels, page=2)
    assert len(panel.select.options) == 2
    text = shown(ip, panel)["text/plain"]
    assert "5 dead (2 listed below, newest death first)" in text
    assert "SMTP <num> | 3" in text and "timeout | 2" in text


# -- a whole triage by its buttons (.click())


def kill_triage(conn, job_id: str, error: str, to: str = "a@example.com") -> str:
    jobs.enqueue(conn, Q_triage, f'{{"to": "{to}"}}', id=job_id, max_attempts=1)
    assert jobs.claim(conn, Q_triage, 60_000).id == job_id
    jobs.fail(conn, Q_triage, job_id, error)
    return job_id


def stage_triage(conn) -> None:
    for i in range(4):
        kill_triage(conn, f"j_smtp{i}", f"SMTP 550 mailbox {i} unavailable", to=f"u{i}@example.com")
    kill_triage(conn, "j_tls", "TLS handshake failed", to="x@example.org")
    kill_triage(conn, "j_to", "timeout after 30s", to="y@example.org")


def test_filter_errors_view_preview_and_reprocess_exactly_the_previewed(conn):
    stage_triage(conn)
    panel = DeadLetterPanel(conn, Q_triage)
    assert "6 dead" in panel.summary.value
    assert "SMTP &lt;num&gt; mailbox &lt;num&gt; unavailable</td><td>4</td>" in panel.errors_view.value
    panel.payload_glob.value = '*@example.org"}'
    panel.filter_button.click()
    assert [v for _, v in panel.select.options] == ["j_tls", "j_to"]
    assert "2 match the filter" in panel.summary.value
    panel.payload_glob.value = ""
    panel.signature.value = "SMTP <num> mailbox <num> unavailable"
    panel.preview_button.click()
    assert panel.previewed == [f"j_smtp{i}" for i in range(4)]
    assert "Preview: <b>4</b> dead jobs" in panel.preview_view.value
    assert "samples: j_smtp0, j_smtp1, j_smtp2, j_smtp3" in panel.preview_view.value
    assert not panel.reprocess_preview_button.disabled
    kill_triage(conn, "j_late", "SMTP 550 mailbox 9 unavailable")  # died after the preview
    panel.rate.value = 1000
    panel.reprocess_preview_button.click()
    assert panel.status_text == "reprocess previewed: 4 reprocessed"
    assert sorted(conn.client.zrange(K_triage + "pending", 0, -1)) == [f"j_smtp{i}" for i in range(4)]
    assert conn.client.zscore(K_triage + "dead", "j_late") is not None  # not touched
    assert panel.previewed == [] and panel.reprocess_preview_button.disabled
    panel.close()


def test_remove_previewed_and_an_error_glob(conn):
    stage_triage(conn)
    panel = DeadLetterPanel(conn, Q_triage)
    panel.error_glob.value = "[Tt][LIi]*"  # globs are case-sensitive
    panel.preview_button.click()
    assert panel.previewed == ["j_tls", "j_to"]
    panel.remove_preview_button.click()
    assert "Remove <b>2</b> previewed dead jobs of dlq?" in panel.confirmation.text.value
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "remove previewed: 2 removed"
    assert not conn.client.exists(K_triage + "job:j_tls") and conn.client.zcard(K_triage + "dead") == 4
    assert "4 dead" in panel.summary.value
    panel.close()


def test_a_read_only_session_previews_but_writes_nothing(conn, backend, request):
    stage_triage(conn)
    before = dump(conn)
    url = None if backend == "fake" else server_url(backend, server_for(backend, request))
    ro = emq.connect(url, embedded="fake" if url is None else None, read_only=True, env="production")
    panel = DeadLetterPanel(ro, Q_triage)
    assert all(getattr(panel, b).disabled for b in WRITING_triage)
    panel.preview_button.click()
    assert len(panel.previewed) == 6 and panel.reprocess_preview_button.disabled
    for b in WRITING_triage:
        getattr(panel, b).click()  # a click that reaches the handler anyway
        assert "read-only session" in panel.status_text, b
    assert dump(conn) == before
    panel.close()


def test_errors_and_undecodable_text_reach_the_status_line_and_display():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    panel = DeadLetterPanel(nowhere, Q_triage)
    assert panel.status_text.startswith("error: lost the server at redis://127.0.0.1:1/0")
    panel.preview_button.click()
    assert panel.status_text.startswith("error: lost the server")


def test_undecodable_bytes_are_shown_escaped(conn):
    conn.client.hset(
        K_triage + "job:j_raw",
        mapping={
            "payload": b"\xff",
            "last_error": b"bad \xfe byte 7",
            "state": "dead",
            "attempts": "1",
            "failures": "1",
        },
    )
    conn.client.zadd(K_triage + "dead", {"j_raw": 1})
    panel = DeadLetterPanel(conn, Q_triage)
    assert "bad \\xfe byte &lt;num&gt;" in panel.errors_view.value
    assert panel.select.options[0][0].startswith("j_raw — bad \\xfe byte 7")
    panel.signature.value = "bad \\xfe byte <num>"
    panel.preview_button.click()
    assert panel.previewed == ["j_raw"]
    panel.reprocess_preview_button.click()
    assert panel.status_text == "reprocess previewed: 1 reprocessed"
    panel.close()


@pytest.mark.parametrize("executor", ["function"])
def test_the_function_executor_moves_grouped_jobs_to_their_lanes(connect_as, executor):
    conn = connect_as(executor)
    jobs.enqueue(conn, Q_triage, "{}", id="j_g", group="acme", max_attempts=1)
    jobs.fail(conn, Q_triage, emq.lanes.claim(conn, Q_triage, 60_000).id, "boom")
    panel = DeadLetterPanel(conn, Q_triage)
    panel.select_all_button.click()
    panel.reprocess_button.click()
    assert panel.status_text == "reprocess selected: 1 reprocessed"
    assert conn.client.zscore(K_triage + "g:acme:pending", "j_g") == 0
    panel.close()


def test_move_previewed_states_its_dry_run_and_moves_exactly_the_previewed(conn):
    stage_triage(conn)
    conn.client.hset(
        K_triage.replace(Q_triage, f"{Q_triage}.quarantine") + "job:j_smtp3", "payload", "another job"
    )
    panel = DeadLetterPanel(conn, Q_triage, confirm_above=2)
    panel.signature.value = "SMTP <num> mailbox <num> unavailable"
    panel.preview_button.click()
    kill_triage(conn, "j_late", "SMTP 550 mailbox 9 unavailable")  # died after the preview
    panel.move_preview_button.click()
    asked = panel.confirmation.text.value
    assert f"Move <b>4</b> previewed dead jobs of {Q_triage} to {Q_triage}.quarantine?" in asked
    assert "3 would move (a new queue, paused). 1 would stay (1 conflict)." in asked
    assert conn.client.zcard(K_triage + "dead") == 7  # nothing moved before Confirm
    panel.confirmation.confirm_button.click()
    assert panel.status_text == f"moved 3 jobs to {Q_triage}.quarantine; 1 stayed (1 conflict)"
    moved = sorted(conn.client.zrange(f"emq:{{{Q_triage}.quarantine}}:dead", 0, -1))
    assert moved == ["j_smtp0", "j_smtp1", "j_smtp2"]
    assert conn.client.zscore(K_triage + "dead", "j_late") is not None
    assert conn.client.zscore(K_triage + "dead", "j_smtp3")
    assert emq.admin.is_paused(conn, f"{Q_triage}.quarantine")
    panel.close()


def test_export_previewed_writes_the_signature_and_shows_its_path(conn, tmp_path):
    stage_triage(conn)
    panel = DeadLetterPanel(conn, Q_triage)
    panel.signature.value = "SMTP <num> mailbox <num> unavailable"
    panel.preview_button.click()
    panel.export_path.value = str(tmp_path / "smtp.parquet")
    panel.export_button.click()
    assert panel.status_text == f"exported 4 jobs to {tmp_path / 'smtp.parquet'}"
    import pandas as pd

    ids = sorted(i.decode() for i in pd.read_parquet(tmp_path / "smtp.parquet")["id"])
    assert ids == [f"j_smtp{i}" for i in range(4)]
    panel.close()


def test_the_list_pages_newest_death_first_and_a_pick_shows_the_job_whole(conn):
    """The Dead letters list is the server's order, a page at a time: the newest death
    first (First, Next, Last), the oldest or the most attempts when asked; a filter lists
    what it matches (the set's order). The job picked last is shown whole below."""
    from dead_letters import written_rows

    ids = [f"j_{i:03d}" for i in range(7)]
    written_rows(conn, Q_triage, "dead", ids, first=1_700_000_000_000, attempts=lambda i: str(1 + i % 3))
    conn.client.hset(K_triage + "job:j_003", "last_error", "SMTP 550 " + "x" * 5_000)
    panel = DeadLetterPanel(conn, Q_triage, page=3)
    listed = lambda: [v for _, v in panel.select.options]  # noqa: E731
    try:
        assert listed() == ["j_006", "j_005", "j_004"]
        assert "7 dead (3 listed below, newest death first)" in panel.summary.value
        assert panel.page_label.value == "rows 1–3 of 7 dead" and panel.prev_button.disabled
        panel.next_button.click()
        assert listed() == ["j_003", "j_002", "j_001"]
        panel.last_button.click()
        assert listed() == ["j_002", "j_001", "j_000"] and panel.next_button.disabled
        panel.first_button.click()
        assert listed() == ["j_006", "j_005", "j_004"]
        panel.order.value = "attempts"  # 3 attempts: j_002 and j_005, the newer first
        assert listed() == ["j_005", "j_002", "j_004"]
        panel.order.value = "oldest"
        assert listed() == ["j_000", "j_001", "j_002"]
        panel.error_glob.value = "SMTP*"
        panel.filter_button.click()
        assert listed() == ["j_003"] and panel.order.disabled and panel.next_button.disabled
        panel.select.value = ("j_003",)
        assert panel.detail.job_id == "j_003" and "SMTP 550 " + "x" * 5_000 in panel.detail.body.value
        panel.select_all_button.click()  # many picked at once: the pane keeps the one shown
        assert panel.detail.job_id == "j_003"
    finally:
        panel.close()


# -- in bulk: selected, all, the counts the buttons restate


def test_bulk_buttons_restate_their_count_and_the_bar_says_what_it_did(conn):
    ids = failed(conn, Q_panels, 4)
    panel = DeadLetterPanel(conn, Q_panels, confirm_above=100)
    assert panel.reprocess_all_button.description == "Reprocess all 4…"
    panel.preview_button.click()
    assert panel.reprocess_preview_button.description == "Reprocess 4 previewed"
    assert panel.remove_preview_button.description == "Remove 4 previewed…"
    panel.select.value = tuple(ids[:2])
    assert panel.reprocess_button.description == "Reprocess 2 selected"
    assert panel.remove_button.description == "Remove 2 selected…"
    said: list[str] = []
    panel.progress.label.observe(lambda change: said.append(plain(change["new"])), names="value")
    panel.reprocess_preview_button.click()
    assert said[0] == "reprocessing 4: 0 done" and "reprocessing 4: 4 done" in said
    assert said[-1] == panel.status_text == "reprocess previewed: 4 reprocessed"
    assert panel.progress.view.layout.display == "flex"
    assert panel.progress.bar.value == panel.progress.bar.max == 4
    assert panel.reprocess_preview_button.description == "Reprocess previewed"


def test_dead_letter_panel_in_bulk(conn):
    ids = failed(conn, Q_panels, 4) + failed(conn, Q_panels, 2, error="timeout")
    panel = DeadLetterPanel(conn, Q_panels)
    assert "6 dead" in panel.summary.value and "timeout" in panel.errors_view.value
    assert panel.reprocess_button.disabled and panel.remove_button.disabled  # nothing selected
    panel.select.value = tuple(ids[:2])
    assert not panel.reprocess_button.disabled
    panel.reprocess_button.click()  # 2, not above confirm_above: at once
    assert panel.status_text == "reprocess selected: 2 reprocessed"
    assert conn.client.zcard(f"emq:{{{Q_panels}}}:dead") == 4
    panel.select.value = (ids[2],)
    panel.remove_button.click()  # a removal always asks
    assert "Remove <b>1</b> selected dead jobs of mail?" in panel.confirmation.text.value
    assert conn.client.exists(f"emq:{{{Q_panels}}}:job:{ids[2]}")
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "remove selected: 1 removed"
    assert not conn.client.exists(f"emq:{{{Q_panels}}}:job:{ids[2]}")
    panel.budget.value = 2
    panel.reprocess_all_button.click()
    assert panel.status_text == "reprocessed 3 dead jobs"
    assert conn.client.zcard(f"emq:{{{Q_panels}}}:dead") == 0 and len(panel.select.options) == 0
    assert panel.reprocess_all_button.disabled  # nothing left to reprocess
