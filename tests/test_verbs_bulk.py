"""The filtered and controlled forms of `reprocess` and `remove` (emq_notebook/verbs/bulk.py)
through %emq, in an in-process IPython shell, on both backends: a preview, the threshold and
--yes, --limit, dry runs, a controlled retry, read-only sessions."""

from typing import Any

from bad_rows import P, Q, kill

from emq_notebook import admin

# -- Do no harm, the bulk verbs: every call is bounded by the work it does (members examined AND
# bytes), whatever the sets hold -- bad rows, ghosts, ids another node wrote outside the name gate,
# 8 MB payloads, a :logs list of 200,000 lines -- and a run walks each member once, so it never re-
# walks (or re-announces) what it left behind. Both backends; the calls that could hold a server run
# under the harness's watchdog (tests/harm.py). Work is observed in the replies and the events,
# never timed.


def test_a_filtered_reprocess_line_moves_at_most_the_move_budget_a_call(conn):
    """`%emq reprocess Q --error GLOB --yes` moves in calls of at most `ID_BUDGET`
    jobs (as `admin.reprocess_jobs` does), whatever the session's `budget` setting
    (1,000 by default, for drains): each id given costs the server a lookup of its own.
    `--budget` still names the calls' size."""
    from emq_notebook import cli, grammar, verbs
    from emq_notebook.defaults import ID_BUDGET

    kill(conn, [f"j_{i}" for i in range(ID_BUDGET + 100)])
    session = cli.ShellSession(say=lambda *_: None)
    session.conn = conn
    sizes: list[int] = []
    run = conn.run

    def counted(name: str, keys: Any, args: Any = (), **kw: Any) -> Any:
        if name == "reprocess_jobs":
            sizes.append(len(args) - 2)  # its ids follow two values (`transitions.decode`)
        return run(name, keys, args, **kw)

    conn.run = counted  # type: ignore[method-assign]
    verbs.execute(session, grammar.parse(f"reprocess {Q} --error boom* --yes"))
    assert sizes == [ID_BUDGET, 100]
    assert conn.client.zcard(P + "dead") == 0
    admin.drain(conn, Q)  # the moved jobs leave pending: the next ones are claimed to die
    kill(conn, [f"k_{i}" for i in range(30)])
    sizes.clear()
    verbs.execute(session, grammar.parse(f"reprocess {Q} --error boom* --yes --budget 20"))
    assert sizes == [20, 10]
