"""DeadLetterPanel (emq_notebook/widgets/dead_letters.py) driven in Python, on both backends:
foreign text shown escaped, Reprocess all and Remove previewed asking before they act, read-
only sessions. (Its buttons through a whole triage: tests/test_triage_panel.py.)"""

import pytest
from helpers import dump
from mailq import K, Q, kill, smtp_dead

from emq_notebook import jobs

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
    from emq_notebook import admin

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
