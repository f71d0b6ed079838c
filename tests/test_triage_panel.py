"""DeadLetterPanel by its buttons (.click()), on both backends: filter, the errors view,
a signature chosen, Preview, then Reprocess / Remove previewed acting on exactly the
previewed ids; read-only sessions grey the writing buttons out and send nothing."""

from __future__ import annotations

import pytest
from helpers import dump, server_for, server_url

import emq_notebook as emq
from emq_notebook import jobs
from emq_notebook.widgets import DeadLetterPanel

Q = "dlq"
K = f"emq:{{{Q}}}:"
WRITING = [
    "reprocess_preview_button",
    "remove_preview_button",
    "move_preview_button",
    "reprocess_button",
    "remove_button",
    "reprocess_all_button",
]


def kill(conn, job_id: str, error: str, to: str = "a@example.com") -> str:
    jobs.enqueue(conn, Q, f'{{"to": "{to}"}}', id=job_id, max_attempts=1)
    assert jobs.claim(conn, Q, 60_000).id == job_id
    jobs.fail(conn, Q, job_id, error)
    return job_id


def stage(conn) -> None:
    for i in range(4):
        kill(conn, f"j_smtp{i}", f"SMTP 550 mailbox {i} unavailable", to=f"u{i}@example.com")
    kill(conn, "j_tls", "TLS handshake failed", to="x@example.org")
    kill(conn, "j_to", "timeout after 30s", to="y@example.org")


def test_filter_errors_view_preview_and_reprocess_exactly_the_previewed(conn):
    stage(conn)
    panel = DeadLetterPanel(conn, Q)
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
    kill(conn, "j_late", "SMTP 550 mailbox 9 unavailable")  # died after the preview
    panel.rate.value = 1000
    panel.reprocess_preview_button.click()
    assert panel.status_text == "reprocess previewed: 4 reprocessed"
    assert sorted(conn.client.zrange(K + "pending", 0, -1)) == [f"j_smtp{i}" for i in range(4)]
    assert conn.client.zscore(K + "dead", "j_late") is not None  # not touched
    assert panel.previewed == [] and panel.reprocess_preview_button.disabled
    panel.close()


def test_remove_previewed_and_an_error_glob(conn):
    stage(conn)
    panel = DeadLetterPanel(conn, Q)
    panel.error_glob.value = "[Tt][LIi]*"  # globs are case-sensitive
    panel.preview_button.click()
    assert panel.previewed == ["j_tls", "j_to"]
    panel.remove_preview_button.click()
    assert "Remove <b>2</b> previewed dead jobs of dlq?" in panel.confirmation.text.value
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "remove previewed: 2 removed"
    assert not conn.client.exists(K + "job:j_tls") and conn.client.zcard(K + "dead") == 4
    assert "4 dead" in panel.summary.value
    panel.close()


def test_a_read_only_session_previews_but_writes_nothing(conn, backend, request):
    stage(conn)
    before = dump(conn)
    url = None if backend == "fake" else server_url(backend, server_for(backend, request))
    ro = emq.connect(url, embedded="fake" if url is None else None, read_only=True, env="production")
    panel = DeadLetterPanel(ro, Q)
    assert all(getattr(panel, b).disabled for b in WRITING)
    panel.preview_button.click()
    assert len(panel.previewed) == 6 and panel.reprocess_preview_button.disabled
    for b in WRITING:
        getattr(panel, b).click()  # a click that reaches the handler anyway
        assert "read-only session" in panel.status_text, b
    assert dump(conn) == before
    panel.close()


def test_errors_and_undecodable_text_reach_the_status_line_and_display():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    panel = DeadLetterPanel(nowhere, Q)
    assert panel.status_text.startswith("error: lost the server at redis://127.0.0.1:1/0")
    panel.preview_button.click()
    assert panel.status_text.startswith("error: lost the server")


def test_undecodable_bytes_are_shown_escaped(conn):
    conn.client.hset(
        K + "job:j_raw",
        mapping={
            "payload": b"\xff",
            "last_error": b"bad \xfe byte 7",
            "state": "dead",
            "attempts": "1",
            "failures": "1",
        },
    )
    conn.client.zadd(K + "dead", {"j_raw": 1})
    panel = DeadLetterPanel(conn, Q)
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
    jobs.enqueue(conn, Q, "{}", id="j_g", group="acme", max_attempts=1)
    jobs.fail(conn, Q, emq.lanes.claim(conn, Q, 60_000).id, "boom")
    panel = DeadLetterPanel(conn, Q)
    panel.select_all_button.click()
    panel.reprocess_button.click()
    assert panel.status_text == "reprocess selected: 1 reprocessed"
    assert conn.client.zscore(K + "g:acme:pending", "j_g") == 0
    panel.close()


def test_move_previewed_states_its_dry_run_and_moves_exactly_the_previewed(conn):
    stage(conn)
    conn.client.hset(K.replace(Q, f"{Q}.quarantine") + "job:j_smtp3", "payload", "another job")
    panel = DeadLetterPanel(conn, Q, confirm_above=2)
    panel.signature.value = "SMTP <num> mailbox <num> unavailable"
    panel.preview_button.click()
    kill(conn, "j_late", "SMTP 550 mailbox 9 unavailable")  # died after the preview
    panel.move_preview_button.click()
    asked = panel.confirmation.text.value
    assert f"Move <b>4</b> previewed dead jobs of {Q} to {Q}.quarantine?" in asked
    assert "3 would move (a new queue, paused). 1 would stay (1 conflict)." in asked
    assert conn.client.zcard(K + "dead") == 7  # nothing moved before Confirm
    panel.confirmation.confirm_button.click()
    assert panel.status_text == f"moved 3 jobs to {Q}.quarantine; 1 stayed (1 conflict)"
    moved = sorted(conn.client.zrange(f"emq:{{{Q}.quarantine}}:dead", 0, -1))
    assert moved == ["j_smtp0", "j_smtp1", "j_smtp2"]
    assert conn.client.zscore(K + "dead", "j_late") is not None and conn.client.zscore(K + "dead", "j_smtp3")
    assert emq.admin.is_paused(conn, f"{Q}.quarantine")
    panel.close()


def test_export_previewed_writes_the_signature_and_shows_its_path(conn, tmp_path):
    stage(conn)
    panel = DeadLetterPanel(conn, Q)
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
    written_rows(conn, Q, "dead", ids, first=1_700_000_000_000, attempts=lambda i: str(1 + i % 3))
    conn.client.hset(K + "job:j_003", "last_error", "SMTP 550 " + "x" * 5_000)
    panel = DeadLetterPanel(conn, Q, page=3)
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
