"""How text from the server is decoded and shown (emq_notebook/decoding.py), on both backends:
foreign rows and events with bytes that are not UTF-8, escapes where text is shown, long ids
clipped where shown, and the ids a bulk call sends."""

from dead_letters import written_dead
from foreign_ids import Q, foreign_ids, written
from helpers import notebook_html

from emq_notebook import admin, decoding, frames
from emq_notebook.defaults import BYTE_BUDGET

# -- Do no harm, ids another node wrote long: a move can count a member's id only after it has read
# it, so what a call reads of a set must follow what its byte budget may still spend, not its budget
# of members. Both backends, each call under the harness's watchdog (tests/harm.py); what a call
# reads is counted from the set reads its script sends (MONITOR on Valkey, a spy on the embedded
# server), never timed.


def test_a_frame_shows_an_id_another_node_made_long_clipped(conn, ip, capsys):
    """A snapshot keeps each id as read (a 70 KB one too: written back, it is the same
    member), but the `emq` shell, a notebook's HTML and a grid show it as its first 200
    characters and its length, as a move reports it: no 70 KB line, no 70 KB cell, no
    70 KB row header in a grid."""
    from emq_notebook import cli
    from emq_notebook.widgets import grid

    long = foreign_ids(1)[0]
    written(conn, "dead", [long, "ok_1"])
    frame = frames.snapshot(conn, Q, "dead")
    assert list(frame.index) == [long, "ok_1"]
    clipped = long[:200] + f"... ({len(long)} bytes)"
    cli.show(frame)
    printed = capsys.readouterr().out
    assert clipped in printed and "ok_1" in printed
    assert max(map(len, printed.splitlines())) < 1_000
    html = notebook_html(ip, frame)
    assert clipped in html and long not in html
    assert list(grid.shown(frame).index) == [clipped, "ok_1"]
    assert list(frame.index) == [long, "ok_1"]


# -- A bulk verb sends a call about the ids its script will examine (`decoding.batch`, counting each
# id `defaults.ID_WORK` times its bytes on the wire, as the scripts do).


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
