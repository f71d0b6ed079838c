"""Do no harm, every field a search reads: `@find` (`triage.find`, `%emq find`, the
dashboard's Jobs tab) and `@errors` (`triage.errors`) copy no field of a row over the
step's bytes, whichever field another node made long: a `last_error` over it matches no
error glob and counts under `triage.long_error_signature()`; a match's shown field over
it is answered by its place and read as `frames.snapshot` reads it (`jobs.whole_field`,
`decoding.not_read` over `MAX_WHOLE_FIELD`). Both backends, under the harness's watchdog
(tests/harm.py); the bounds are made small here (a step's bytes 64 KB, a field read whole
up to a byte budget and 64 KB) so a field over them stays small. Work is observed in the
scripts' replies and (on Valkey) the bytes the server wrote, never timed."""

from __future__ import annotations

from typing import Any

import pytest
from harm import bounded, commands_sent, replies, written_out

from emq_notebook import decoding, defaults, jobs, triage
from emq_notebook.defaults import BYTE_BUDGET
from emq_notebook.widgets import Dashboard

Q = "findfields"
P = f"emq:{{{Q}}}:"
FIELD = 64 << 10  # a search step's bytes, and the longest field it copies, here
WHOLE = BYTE_BUDGET + FIELD  # the longest field read whole (MAX_WHOLE_FIELD), here
BETWEEN = 2 * FIELD  # over the step's bound: read by itself (`@read_job`)
OVER = 2 * BYTE_BUDGET  # over WHOLE: never read


@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch):
    monkeypatch.setattr(defaults, "BYTE_BUDGET", FIELD)
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", WHOLE)


def watched_out(conn, srv, call) -> tuple[Any, int | None]:
    """`harm.written_out` of `call()` run under the watchdog."""
    return written_out(conn, srv, lambda: bounded(call, srv))


def longest_text(calls: list) -> int:
    """The longest text any of these script replies holds, at any depth."""

    def texts(v: Any):
        if isinstance(v, str):
            yield len(v)
        elif isinstance(v, list):
            for x in v:
                yield from texts(x)

    return max((n for reply in calls for n in texts(reply)), default=0)


def dead(conn, error: str = "boom", **fields: str) -> str:
    """A dead job that failed with `error`, whose row another node gave `fields`."""
    job_id = jobs.enqueue(conn, Q, '{"n": 1}', max_attempts=1)
    jobs.claim(conn, Q)
    jobs.fail(conn, Q, job_id, error)
    if fields:
        conn.client.hset(P + "job:" + job_id, mapping=fields)
    return job_id


def test_a_long_last_error_matches_no_error_glob_and_is_never_copied(harm):
    conn, srv = harm
    plain = [dead(conn, "boom 1"), dead(conn, "boom 2")]
    near = dead(conn, last_error="boom " + "n" * BETWEEN)
    far = dead(conn, last_error="boom " + "f" * OVER)
    calls = replies(conn, "find")
    frame, out = watched_out(conn, srv, lambda: triage.find(conn, Q, error="boom*", limit=None))
    assert frame.index.tolist() == plain  # the long ones match no glob, though they would
    assert calls and longest_text(calls) < 1000
    if out is not None:
        assert out < 64_000
    # without a glob, the long rows are matches: their last_error read as a snapshot does
    frame = bounded(lambda: triage.find(conn, Q, limit=None), srv)
    assert frame.index.tolist() == [*plain, near, far]
    assert frame.loc[near, "last_error"] == "boom " + "n" * BETWEEN
    assert frame.loc[far, "last_error"] == decoding.not_read(OVER + 5)
    assert longest_text(calls) <= FIELD
    # nor does a long last_error have a signature a find narrows by
    assert bounded(lambda: triage.find(conn, Q, signature="boom <num>"), srv).index.tolist() == plain


def test_errors_counts_a_long_last_error_under_its_fixed_signature(harm):
    conn, srv = harm
    dead(conn, "boom 1")
    dead(conn, "boom 2")
    first = dead(conn, last_error="x" * OVER)
    dead(conn, last_error="y" * (OVER + 1))
    calls = replies(conn, "errors")
    got, out = watched_out(conn, srv, lambda: triage.errors(conn, Q))
    long = triage.long_error_signature()
    assert long == f"<over {FIELD} bytes>"
    assert got["count"].to_dict() == {long: 2, "boom <num>": 2}
    assert got.loc[long, "sample_id"] == first
    assert got.loc[long, "sample_error"] == decoding.not_read(OVER, "BYTE_BUDGET")
    assert calls and longest_text(calls) < 1000
    if out is not None:
        assert out < 64_000


@pytest.mark.parametrize("field", ["progress", "group"])
def test_a_matchs_long_shown_field_is_read_as_a_snapshot_reads_it(harm, field):
    conn, srv = harm
    near = dead(conn, **{field: "n" * BETWEEN})
    far = dead(conn, **{field: "f" * OVER})
    plain = dead(conn)
    calls = replies(conn, "find")
    frame, out = watched_out(conn, srv, lambda: triage.find(conn, Q, error="boom", limit=None))
    assert frame.index.tolist() == [near, far, plain]
    assert frame.loc[near, field] == "n" * BETWEEN  # read by itself, whole
    assert frame.loc[far, field] == decoding.not_read(OVER)
    assert frame.loc[far, "last_error"] == "boom" and frame.loc[far, "payload"] == '{"n": 1}'
    # the script answered both long fields by their places, their bytes left on the server
    assert calls and longest_text(calls) <= FIELD
    place = triage.frames.FIELDS.index(field) + 1
    assert [row[2 + len(triage.frames.FIELDS) :] for reply in calls for row in reply[3:]] == [
        [place],
        [place],
        [],
    ]
    if out is not None:  # Valkey wrote the field read whole, never the one over WHOLE
        assert BETWEEN < out < BETWEEN + 64_000


@pytest.mark.parametrize(
    ("field", "filters"),
    [("group", {"group": "g"}), ("attempts", {"min_attempts": 0}), ("created_at", {"created_after": 0})],
)
def test_a_long_field_a_filter_reads_matches_nothing_and_is_never_read(harm, field, filters):
    conn, srv = harm
    dead(conn, **{field: field[0] * OVER})
    calls = replies(conn, "find")
    frame = bounded(lambda: triage.find(conn, Q, limit=None, **filters), srv)
    assert frame.empty
    assert calls and longest_text(calls) < 1000
    if srv is not None:  # the row measured, no field of it read (HMGET, SORT_RO)
        counted = commands_sent(conn.client, lambda: triage.find(conn, Q, **filters))
        assert counted["hstrlen"] == 1 and not {"hmget", "sort_ro", "sort"} & set(counted)


def test_the_jobs_tab_shows_a_long_field_by_its_length_and_filters_it_out(harm):
    conn, srv = harm
    plain = dead(conn, "boom 1")
    far = dead(conn, last_error="boom " + "f" * OVER, progress="p" * OVER)
    calls = replies(conn, "find")
    d = bounded(lambda: Dashboard(conn, auto=False, queue=Q), srv)
    try:
        view = d.tab("Jobs")
        assert view.frame.index.tolist() == [plain, far]
        assert view.frame.loc[far, "last_error"] == decoding.not_read(OVER + 5)
        assert view.frame.loc[far, "progress"] == decoding.not_read(OVER)
        view.error_glob.value = "boom*"
        _, out = watched_out(conn, srv, view.filter_button.click)
        assert view.frame.index.tolist() == [plain]
        if out is not None:
            assert out < 64_000
    finally:
        d.close()
    assert calls and longest_text(calls) <= FIELD
