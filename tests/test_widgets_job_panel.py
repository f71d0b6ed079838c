"""JobPanel (emq_notebook/widgets/job_panel.py), on both backends: its buttons edit the
row, a refusal changes nothing; on rows another client wrote, bytes that are not UTF-8
shown as escapes and kept as bytes, numbers that are no ASCII whole number shown as the
text they are."""

import html

from helpers import dump, failed
from panels import shown, unsendable

from emq_notebook import jobs
from emq_notebook.widgets import JobPanel, QueuePanel

Q = "mail"


def test_undecodable_bytes_show_as_escapes_and_stay_bytes(conn, ip):
    jid = failed(conn, Q, 1)[0]
    key = f"emq:{{{Q}}}:job:{jid}"
    conn.client.execute_command("HSET", key, "payload", b'{"to": "\xff"}', "last_error", b"bad \xfe byte")
    conn.client.execute_command("RPUSH", key + ":logs", b"log \xfd line")
    panel = JobPanel(conn, Q, jid)
    assert panel.payload.value == '{"to": "\\xff"}'
    assert "bad \\xfe byte" in panel.row_view.value and "log \\xfd line" in panel.logs_view.value
    data = shown(ip, panel)
    assert "bad \\xfe byte" in data["text/html"] and "log \\xfd line" in data["text/plain"]
    assert unsendable(panel) == [] and "\udcff" not in data["text/html"] + data["text/plain"]
    # the editor shows the bytes' picture: Update with it unedited writes nothing
    before = dump(conn)
    panel.update_button.click()
    assert panel.status_text.startswith("payload unchanged") and dump(conn) == before
    raw = conn.client.connection_pool.get_encoder()
    assert raw.encode(jobs.get_job(conn, Q, jid)["payload"]) == b'{"to": "\xff"}'
    queue_panel = QueuePanel(conn, Q)
    assert "dead | 1" in shown(ip, queue_panel)["text/plain"] and unsendable(queue_panel) == []


def test_the_job_panel_shows_numbers_another_node_wrote_as_text(conn, ip):
    """A counter or a time that is no ASCII whole number ("²²²²", 5,000 digits, a time of
    400 digits) shows as the text it is, as `%emq job` shows it; the panel builds."""
    jid = jobs.enqueue(conn, Q, "{}")
    key = f"emq:{{{Q}}}:job:{jid}"
    odd = {"attempts": "²²²²", "failures": "1" * 5_000, "created_at": "9" * 400, "due_at": "٣٤٥٦٧"}
    conn.client.hset(key, mapping=odd)
    panel = JobPanel(conn, Q, jid)
    for value in odd.values():
        assert html.escape(value) in panel.row_view.value
    assert "Exceeds the limit" not in panel.status_text
    assert "1" * 5_000 in shown(ip, panel)["text/html"]
    # a whole number and a time a node writes still read as an operator reads them
    conn.client.hset(key, mapping={"attempts": "12345", "created_at": "1700000000000"})
    panel = JobPanel(conn, Q, jid)
    assert "12,345" in panel.row_view.value and "(1700000000000)" in panel.row_view.value


# -- its buttons edit the row; a refusal changes nothing


def test_job_panel_edits_the_row(conn):
    jid = failed(conn, Q, 1)[0]
    panel = JobPanel(conn, Q, jid)
    assert not panel.reprocess_button.disabled
    panel.payload.value = "{not json"
    panel.update_button.click()
    assert panel.status_text.startswith("error: malformed JSON")
    assert jobs.get_job(conn, Q, jid)["payload"] == '{"n": 0}'
    panel.payload.value = '{"n": 0, "fixed": true}'
    panel.update_button.click()
    assert jobs.get_job(conn, Q, jid)["payload"] == '{"n": 0, "fixed": true}'
    panel.progress_value.value = "75"
    panel.progress_button.click()
    panel.log_line.value = "mended by hand"
    panel.log_button.click()
    assert jobs.get_job_logs(conn, Q, jid) == ["mended by hand"]
    panel.reprocess_button.click()
    assert jobs.get_job(conn, Q, jid)["state"] == "pending"
    assert panel.reprocess_button.disabled  # no longer dead
    panel.remove_button.click()
    assert panel.row is None and "gone" in panel.row_view.value
    # the line says the removal (the hostile pass of #41: it said "refused: job mail … — gone")
    assert panel.status_text == f"removed {jid}"


def test_job_panel_refusal_changes_nothing(conn):
    jid = jobs.enqueue(conn, Q, "x")
    jobs.claim(conn, Q, 60_000)
    panel = JobPanel(conn, Q, jid)
    before = dump(conn)
    panel.remove_button.click()
    assert panel.status_text == f"refused: remove mail {jid} — locked"
    assert dump(conn) == before
