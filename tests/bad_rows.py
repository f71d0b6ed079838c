"""Bad rows and ghosts where another node left them, for the bulk verbs' harm cases."""

import pytest
from dead_letters import dead_letter
from harm import commands_sent
from helpers import dump

from emq_notebook.errors import BadInput

Q = "harm"
P = f"emq:{{{Q}}}:"


def kill(conn, ids, group=None, error="boom"):
    """Each id enqueued, claimed and failed for good: dead, scored by its time of death."""
    for job_id in ids:
        dead_letter(conn, Q, job_id, error, group=group)


def bad_rows_and_ghosts(conn, bad: int, ghosts: int, key: str = "dead") -> list[str]:
    """`bad` rows no transition can read and `ghosts` members with no row, interleaved at
    the head of set `key` (scored 1, 2, ...: the oldest), written by pipeline; the
    bad rows' ids."""
    pipe = conn.client.pipeline(transaction=False)
    bad_ids: list[str] = []
    for i in range(bad + ghosts):
        if len(bad_ids) < bad and (i % 2 == 0 or i - len(bad_ids) == ghosts):
            job_id = f"b_{i:06d}"
            bad_ids.append(job_id)
            pipe.hset(P + "job:" + job_id, mapping={"payload": "{}", "attempts": "three", "state": key})
        else:
            job_id = f"g_{i:06d}"
        pipe.zadd(P + key, {job_id: i + 1})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    return bad_ids


def refused_before_anything_is_sent(conn, srv, call, says: str) -> None:
    """`call(conn)` raises a one-line `BadInput` naming `says`, and sends nothing."""
    before = dump(conn)

    def refused() -> None:
        with pytest.raises(BadInput) as info:
            call(conn)
        assert "\n" not in str(info.value) and says in str(info.value)

    if srv is None:  # every command the client sends
        calls: list[tuple] = []
        real = conn.client.execute_command
        conn.client.execute_command = lambda *a, **kw: (calls.append(a), real(*a, **kw))[1]
        refused()
        conn.client.execute_command = real
        assert calls == []
    else:  # counted on the server
        assert commands_sent(conn.client, refused) == {}
    assert dump(conn) == before
