"""Do no harm, the reads (bench/harm.py found each): a job's long `:logs` list is read
in pages bounded by lines and bytes; a payload too large for a script is read with a
plain HGET, never inside one; a snapshot's call stops at about a byte budget; find,
errors and the snapshot pass over a member whose id names another job's `:logs` list
(its "row" key is a list); a runbook finds its queue without a SCAN. Both backends,
every call that could hold a server under the harness's watchdog (tests/harm.py).
Work is observed in the replies, never timed.

Here: the snapshot's cases (frames.py), to fold into test_frames.py after #43; the logs,
find and errors, dead-run and runbook cases are in test_jobs.py, test_triage.py,
test_moves.py and test_runbook.py."""

from typing import Any

import pandas as pd
from dead_rows import BIG, P, Q, dead_row, long_dead
from harm import bounded, replies

from emq_notebook import frames
from emq_notebook.defaults import BYTE_BUDGET

# -- a payload too large for a script, and a call's bytes ---------------------------------


def test_a_snapshot_reads_a_payload_too_large_for_a_script_with_a_plain_read(harm):
    conn, srv = harm
    big = "y" * BIG
    for i in range(5):
        dead_row(conn, f"j_{i}", body=big if i == 2 else "{}", score=i)
    calls = replies(conn, "read_rows")
    frame = bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    assert frame.loc["j_2", "payload"] == big and list(frame.index) == [f"j_{i}" for i in range(5)]
    # the script never carried it: the row came back without it, its place marked
    assert [len(row) for reply in calls for row in reply] == [8, 8, 9, 8, 8]
    assert all(
        sum(len(v) for row in reply for v in row if isinstance(v, str)) < BYTE_BUDGET for reply in calls
    )


def straddling_dead(conn) -> dict[str, dict[str, str]]:
    """1,203 dead members across three `frames.BATCH`es of 500: ordinary rows; payloads
    of exactly a byte budget (read in the script, ending its call), one byte over (read
    with a plain HGET), two halves that straddle a budget; members with no row; ids
    naming another job's :logs and :lock; a last_error that is not UTF-8. Answers each
    id's row as the server holds it ({} for none)."""
    odd: dict[int, Any] = {
        497: "P" * BYTE_BUDGET,
        498: "O" * (BYTE_BUDGET + 1),
        499: None,  # a member with no row
        500: "j_00010:logs",
        501: "H" * (BYTE_BUDGET // 2 + 1),
        502: "h" * (BYTE_BUDGET // 2 + 1),
        999: "Q" * (BYTE_BUDGET + 1),
        1000: "R" * BYTE_BUDGET,
        1001: "j_00011:lock",
        1202: "S" * (BYTE_BUDGET + 1),
    }
    rows: dict[str, dict[str, str]] = {}
    pipe = conn.client.pipeline(transaction=False)
    for i in range(1_203):
        job_id, value = f"j_{i:05d}", odd.get(i, "{}")
        if value is None or value.startswith("j_"):
            job_id = value or job_id
            rows[job_id] = {}
        else:
            error = "bytes \udcff\udcfe" if i == 7 else f"boom {i}"
            rows[job_id] = {"payload": value, "attempts": str(i % 7), "last_error": error}
            pipe.hset(P + "job:" + job_id, mapping=rows[job_id] | {"state": "dead"})
        pipe.zadd(P + "dead", {job_id: 1_000 + i})
    pipe.rpush(P + "job:j_00010:logs", "a line")
    pipe.execute()
    return rows


def test_a_snapshot_across_batches_and_byte_budgets_equals_the_rows_in_order(harm):
    conn, srv = harm
    rows = straddling_dead(conn)
    order = list(rows)
    calls = replies(conn, "read_rows")
    plain = []
    real = conn.command
    conn.command = lambda *parts: (plain.append(parts[0]), real(*parts))[1]
    frame = bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    assert list(frame.index) == order and frame.index.is_unique
    shown = lambda column: [None if pd.isna(v) else v for v in frame[column]]  # noqa: E731
    assert shown("payload") == [r.get("payload") for r in rows.values()]
    assert shown("last_error") == [r.get("last_error") for r in rows.values()]
    assert list(frame.attempts) == [int(r.get("attempts", 0)) for r in rows.values()]
    assert set(frame.state) == {"dead"}
    # each row answered once, at most a batch a call, about a byte budget a call; the
    # three payloads over the budget read with a plain HGET each
    assert sum(len(reply) for reply in calls) == 1_203
    assert all(len(reply) <= frames.BATCH for reply in calls)
    # a call ends before the row that would take it past the budget (its first row is
    # read as far as it fits), and the rest of its batch goes again
    assert [len(reply) for reply in calls] == [497, 3, 2, 498, 203]
    assert all(sum(len(v) for row in r for v in row if isinstance(v, str)) <= BYTE_BUDGET for r in calls)
    assert plain.count("HGET") == 3
    assert conn.client.lrange(P + "job:j_00010:logs", 0, -1) == ["a line"]
    # a page across the batch edges shows the same rows
    page = frames.snapshot(conn, Q, states="dead", offset=496, limit=508)
    assert list(page.index) == order[496:1004]
    assert [None if pd.isna(v) else v for v in page.payload] == shown("payload")[496:1004]


def test_a_snapshot_of_long_ids_sends_and_reads_about_a_byte_budget_of_them_a_call(harm):
    conn, srv = harm
    ids = long_dead(conn, 300, 20_000)  # 6 MB of ids: 300 of one read_rows batch would be all of it
    sent_ids: list[int] = []
    real = conn.run

    def run(script, keys, args=(), **kw):
        if script == "read_rows":
            sent_ids.append(sum(len(a) for a in args[2 + int(args[0]) :]))
        return real(script, keys, args, **kw)

    conn.run = run
    pages = zranges(conn)
    frame = bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    assert list(frame.index) == ids
    assert list(frame.last_error) == [f"upstream timed out after {i} ms" for i in range(300)]
    assert sum(sent_ids) == 300 * 20_000 and max(sent_ids) <= BYTE_BUDGET
    # each page of members is about a byte budget of them: one that reaches it ends it
    sizes = [stop - start + 1 for _, start, stop in pages]
    assert sum(sizes) == 300 and all((n - 1) * 20_000 < BYTE_BUDGET for n in sizes), sizes


def zranges(conn, then=None) -> list[tuple]:
    """The (key, start, stop) of every page of members `conn` reads from now on (one
    `@read_members` call: `stop` the rank of the last member it answered); `then()` runs
    after the first."""
    seen: list[tuple] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        reply = real(name, keys, args, **kw)
        if name == "read_members":
            start = int(args[1])
            seen.append((keys[0] + args[0], start, start + len(reply) // 2 - 1))
            if then and len(seen) == 1:
                then()
        return reply

    conn.run = run
    return seen


def test_a_snapshot_reads_a_big_set_a_page_of_members_a_call(harm, monkeypatch):
    conn, srv = harm
    monkeypatch.setattr(frames, "MEMBERS_A_CALL", 3)
    for i in range(8):
        dead_row(conn, f"j_{i}", score=10 + i)
    calls = zranges(conn)
    frame = bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    assert list(frame.index) == [f"j_{i}" for i in range(8)]
    assert calls == [(P + "dead", 0, 2), (P + "dead", 3, 5), (P + "dead", 6, 7)]
    calls.clear()
    page = frames.snapshot(conn, Q, states="dead", offset=1, limit=5)
    assert list(page.index) == [f"j_{i}" for i in range(1, 6)]
    assert calls == [(P + "dead", 1, 3), (P + "dead", 4, 5)]


def test_a_snapshot_read_in_pages_shows_a_member_once_when_the_set_shifts(harm, monkeypatch):
    conn, srv = harm
    monkeypatch.setattr(frames, "MEMBERS_A_CALL", 3)
    for i in range(6):
        dead_row(conn, f"j_{i}", score=10 + i)
    # a job dies ahead of the rest after the first page: the second page starts one back
    zranges(conn, then=lambda: dead_row(conn, "j_early", score=1))
    frame = frames.snapshot(conn, Q, states="dead")
    assert list(frame.index) == [f"j_{i}" for i in range(6)]


def test_a_snapshot_of_large_texts_is_read_about_a_byte_budget_a_call(harm):
    conn, srv = harm
    text = "e" * 300_000
    for i in range(12):
        dead_row(conn, f"j_{i:02d}", error=text, score=i)
    calls = replies(conn, "read_rows")
    frame = bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    assert len(frame) == 12 and set(frame["last_error"]) == {text}
    # three texts fit the budget: a call ends before the fourth, which goes again
    assert [len(reply) for reply in calls] == [3, 3, 3, 3]


# -- a member whose id names another job's :logs list ------------------------------------


def test_a_snapshot_shows_an_id_naming_another_jobs_logs_as_a_row_with_no_field(dead_with_a_logs_id):
    conn, srv, rows = dead_with_a_logs_id
    frame = bounded(lambda: frames.snapshot(conn, Q, states="dead"), srv, what="snapshot")
    assert list(frame.index) == ["j_0:logs", *rows]
    assert frame.loc["j_0:logs", ["payload", "last_error"]].isna().all()
    assert conn.client.lrange(P + "job:j_0:logs", 0, -1) == ["one", "two"]
