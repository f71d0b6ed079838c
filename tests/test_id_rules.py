"""A bulk verb sends a call about the ids its script will examine (`decoding.batch`,
counting each id `defaults.ID_WORK` times its bytes on the wire, as the scripts do)."""

from __future__ import annotations

from dead_letters import written_dead

from emq_notebook import admin, decoding
from emq_notebook.defaults import BYTE_BUDGET


def test_a_call_is_sent_about_the_bytes_its_script_examines(conn):
    """40 dead ids of 20 KB: the script counts each at ID_WORK times its bytes, so a
    call examines about three; a call is sent about that many, not 52 (1 MB of them,
    each sent again until examined: 13 times the bytes)."""
    ids = [f"{k:03d}" + "x" * 20_000 for k in range(40)]
    written_dead(conn, "long", ids)
    sent: list[int] = []
    real = conn.run

    def counted(name, keys, args=(), **kw):
        sent.append(sum(len(str(a)) for a in args[2:]))
        return real(name, keys, args, **kw)

    conn.run = counted
    words = admin.reprocess_jobs(conn, "long", ids)
    assert set(words.values()) == {"reprocessed"}
    whole = sum(map(len, ids))
    assert sum(sent) <= 2 * whole, (len(sent), sum(sent), whole)


def test_a_batch_counts_bytes_on_the_wire_and_its_weight():
    euro = "\u20ac" * 100  # 300 bytes
    assert decoding.batch([euro] * 10, 0, 10, 900) == [euro] * 3
    assert decoding.batch([euro] * 10, 2, 10, 900, weight=3) == [euro]  # one at least
    assert decoding.batch(["ab"] * 10, 4, 3, BYTE_BUDGET) == ["ab"] * 3
    # a byte read from the server that is not UTF-8 is one byte on the wire
    assert decoding.batch(["\udcff" * 300] * 4, 0, 4, 900) == ["\udcff" * 300] * 3
