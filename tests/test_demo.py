"""The demos (emq_notebook/demo.py): the incident they tell and the guard on what they write.

A demo writes only to queues it made itself: pointed at a server that holds a real
queue of its name, it stops with `QueueInUse` before writing anything (both backends)."""

import pytest
from keydump import changed, dump

import emq_notebook as emq
from emq_notebook import admin, demo, jobs, lanes, repeat
from emq_notebook.widgets import OperatorConsole


def real_queue(conn, q="newsletters"):
    """A live queue somebody else runs: a backlog, a job in flight (its lock has a TTL),
    a dead job with logs, a lane, a repeatable."""
    for n in range(5):
        jobs.enqueue(conn, q, f'{{"n": {n}}}', id=f"j_real{n}", max_attempts=1)
    jobs.claim(conn, q, 600_000)
    jobs.fail(conn, q, jobs.claim(conn, q, 600_000)[0], "SMTP 550")
    jobs.add_log(conn, q, "j_real4", "still queued")
    jobs.enqueue(conn, q, "{}", id="j_lane", group="acme")
    lanes.set_limit(conn, q, "acme", 2)
    repeat.register(conn, q, "digest", 86_400_000, "{}")


def test_a_real_queue_of_the_demos_name_is_left_byte_for_byte(conn):
    real_queue(conn)
    before = dump(conn.client)
    assert any(k.endswith(":lock") and v[2] > 0 for k, v in before.items())  # a TTL to keep
    with pytest.raises(emq.QueueInUse, match=r"'newsletters' .* holds \d+ keys .* nothing was written"):
        demo.fresh(conn, "console", "newsletters")  # the first name is free: still nothing written
    assert changed(before, dump(conn.client)) == []


def test_an_empty_paused_queue_is_a_real_queue_too(conn):
    admin.pause(conn, "newsletters")  # one key: meta {paused: 1}
    before = dump(conn.client)
    with pytest.raises(emq.QueueInUse):
        demo.fresh(conn, "newsletters")
    assert changed(before, dump(conn.client)) == []


def test_the_refusal_is_one_line_naming_the_server(conn):
    real_queue(conn, "mailers")
    with pytest.raises(emq.QueueInUse) as caught:
        demo.fresh(conn, "mailers")
    (line,) = caught.value._render_traceback_()
    assert line.startswith("QueueInUse: 'mailers' on ") and conn.label in line and "\n" not in line


def test_a_demo_runs_again_on_the_queues_it_made(conn):
    demo.fresh(conn, "mailers", "scratch")
    assert demo.made_by_a_demo(conn, "mailers") and demo.made_by_a_demo(conn, "scratch")
    real_queue(conn, "mailers")  # what the demo seeds
    admin.pause(conn, "scratch")
    demo.fresh(conn, "mailers", "scratch")  # its own: emptied, marked again
    for q in ("mailers", "scratch"):
        assert conn.scan(f"emq:{{{q}}}:*") == [f"emq:{{{q}}}:meta"]
        assert conn.client.hgetall(f"emq:{{{q}}}:meta") == {"created_by": "emq_notebook.demo"}


def test_a_demo_queue_obliterated_mid_way_is_still_the_demos(conn):
    demo.fresh(conn, "legacy")
    for n in range(50):
        jobs.enqueue(conn, "legacy", "{}", id=f"j_{n:02}")
    admin.pause(conn, "legacy")
    assert admin.obliterate(conn, "legacy", budget=10) == "more"  # interrupted after one call
    demo.fresh(conn, "legacy")  # meta, the mark with it, goes last
    assert admin.job_count(conn, "legacy") == 0


def test_the_operator_console_will_not_rebuild_a_real_queue(conn):
    real_queue(conn, "console")
    before = dump(conn.client)
    console = OperatorConsole(conn)
    assert console.try_it() is None
    assert isinstance(console.last, emq.QueueInUse) and console.status_text.startswith("error: ")
    assert changed(before, dump(conn.client)) == []


def test_a_read_only_connection_checks_and_writes_nothing(conn):
    ro = emq.Connection(conn.client, conn.label, read_only=True)
    with pytest.raises(emq.ReadOnly):
        demo.fresh(ro, "mailers")
    assert dump(conn.client) == {}


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.


def test_the_demo_tells_its_story_to_a_newcomer(conn, monkeypatch):
    from emq_notebook import demo

    if conn.label == "embedded fakeredis":
        monkeypatch.delenv("EMQ_URL", raising=False)
    else:
        monkeypatch.setenv("EMQ_URL", conn.label)
    lines: list[str] = []
    assert demo.main(lines.append) == 0
    story = "\n".join(lines)
    for said in (
        "queued 4 mails on mailers, one attempt each",
        "the mailer has a bug: it cannot send to an address without an @",
        "the worker took 4 jobs: 2 delivered, 2 failed and are dead",
        "mended the payload of j_mail1: bo.example.com -> bo@example.com",
        "mended the payload of j_mail3: di.example.com -> di@example.com",
        "reprocessed 2 dead jobs",
        "j_mail0 was delivered: a completed job leaves no row",
        "refused: reprocess mailers j_mail0 — gone",
        "resumed mailers: the worker took 2 jobs, 2 delivered, 0 dead",
        "footprint now 0 keys",
    ):
        assert said in story, said
    order = ["2 failed", "mended", "reprocessed", "j_mail0 — gone", "footprint"]
    assert [story.index(s) for s in order] == sorted(story.index(s) for s in order)
    assert ("gone when it exits" in lines[0]) == (conn.label == "embedded fakeredis")
