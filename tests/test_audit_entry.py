"""What an audit entry says of a call (emq_notebook/audit/entry.py).

The audit entry's values under attack (SPEC 11, 12), on both backends.

A one-transition verb hands its entry to the audited twin as plain arguments, last in
its ARGV (`audit.Record.values`, `lua/includes/audited.lua`); a bulk verb writes it
after its last reply (`append`).
Either way the entry read back is what was meant, byte for byte: empty values,
lengths at each length byte's edge, NUL bytes, bytes another node wrote that are
not UTF-8, a lone surrogate typed by an operator (U+FFFD: no server can hold it),
emoji.

What an operator types is bounded: an identity field is cut at `audit.MAX_TEXT`
characters and an id at `audit.MAX_ARG` (the digest covers it whole), so a 17 MB
`--reason` is never a 17 MB XADD holding the server."""

from __future__ import annotations

import json
import unicodedata

import helpers
import pytest
from dead_letters import written_dead
from hypothesis import given
from hypothesis import strategies as st

import emq_notebook as emq
from emq_notebook import admin, audit, connector, jobs
from emq_notebook.decoding import one_line
from emq_notebook.keyspace import MAX_NAME, audit_key
from emq_notebook.redaction import scrub

Q = "values"
P = f"emq:{{{Q}}}:"

# texts an entry must hold as meant, and what the server holds of each
TEXTS = {
    "empty": ("", ""),
    "nul": ("a\x00b\x00", "a\x00b\x00"),
    # bytes another node wrote, read back under surrogateescape: the same bytes again
    "not_utf8": ("by\udcff\udcfete", "by\udcff\udcfete"),
    # half an emoji pasted by an operator: no server can hold it
    "lone_surrogate": ("half \ud83d an emoji", "half \ufffd an emoji"),
    "emoji": ("\U0001f525 pager \U0001f692", "\U0001f525 pager \U0001f692"),
}


def raw(conn: emq.Connection, q: str = Q) -> list[dict[str, str]]:
    """The stream's entries as the server holds them (under surrogateescape), oldest first."""
    return [fields for _, fields in conn.client.xrange(audit_key(q))]


@pytest.fixture
def appended(monkeypatch) -> list[str]:
    """The verbs whose entry went by `audit.append` (after the transition), not by its twin."""
    seen: list[str] = []
    real = audit.append

    def spy(conn, queue, fields, keep=audit.KEEP):
        seen.append(fields["verb"])
        return real(conn, queue, fields, keep)

    monkeypatch.setattr(audit.recorder, "append", spy)
    return seen


# a one-transition verb (its twin writes the entry) and a bulk one (written after)
WAYS = {
    "twin": ("pause", lambda conn: admin.pause(conn, Q)),
    "after": ("drain", lambda conn: admin.drain(conn, Q)),
}


@pytest.mark.parametrize("way", sorted(WAYS))
@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_each_text_an_operator_or_another_node_gives_reaches_the_entry_as_meant(
    conn, kind, way, appended, monkeypatch
):
    text, held = TEXTS[kind]
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    jobs.enqueue(conn, Q, "{}", id="j1")
    conn.name, conn.env, conn.reason = text, text, text
    audit.set_notebook(text)
    verb, call = WAYS[way]
    call(conn)
    *began, entry = raw(conn)  # a bulk verb's `started` entry first
    assert [(e["verb"], e["outcome"]) for e in [*began, entry]] == [(verb, "started")] * len(began) + [
        (verb, "done")
    ]
    for each in (*began, entry):
        assert {f: each[f] for f in ("conn", "env", "notebook", "reason")} == dict.fromkeys(
            ("conn", "env", "notebook", "reason"), held
        )
    assert appended == ([] if way == "twin" else [verb, verb])
    row = audit.read(conn, Q).iloc[0]
    assert (row.conn, row.env, row.notebook, row.reason) == (one_line(held),) * 4


@pytest.mark.parametrize("kind", ["nul", "not_utf8", "emoji"])
def test_an_option_holding_each_text_reaches_the_entrys_args_as_meant(conn, kind):
    text, held = TEXTS[kind]
    jobs.enqueue(conn, Q, "{}", id="j1", max_attempts=1)
    jobs.claim(conn, Q, 60_000)
    with audit.surface("magic"):
        jobs.fail(conn, Q, "j1", text)
    [entry] = raw(conn)
    assert (entry["verb"], entry["outcome"], json.loads(entry["args"])) == ("fail", "done", {"error": held})
    # read back as every column shows text: a byte that is not UTF-8 as \xNN, a NUL as \x00
    assert audit.read(conn, Q).args[0] == {"error": one_line(held)}


def valued(n: int) -> str:
    """A value of exactly `n` bytes holding a NUL, bytes not UTF-8 and emoji (cut
    anywhere: a cut emoji's bytes read back as escaped bytes), as text."""
    unit = b"\x00\xff" + "\U0001f525".encode() + b"ab:3"
    return (unit * (n // len(unit) + 1))[:n].decode("utf-8", "surrogateescape")


@pytest.mark.parametrize("n", [0, 1, 255, 256, 65_535, 65_536])
def test_a_value_of_each_length_the_twin_carries_reaches_the_entry_byte_exact(conn, n, appended, monkeypatch):
    value = valued(n)
    assert len(value.encode("utf-8", "surrogateescape")) == n
    # the identity's own values are clipped far below these lengths: the wire is tested here
    helpers.say_identity(monkeypatch, lambda c: (value, "", value, "", "python", value, value))
    jobs.enqueue(conn, Q, "{}", id="j1")
    jobs.remove_job(conn, Q, "j1")
    [entry] = raw(conn)
    assert (entry["verb"], entry["outcome"], entry["count"]) == ("remove", "done", "1")
    assert (entry["who"], entry["conn"], entry["notebook"], entry["reason"]) == (value,) * 4
    assert (entry["acl_user"], entry["env"], entry["surface"]) == ("", "", "python")
    assert json.loads(entry["ids"])["first"] == ["j1"]
    assert appended == []  # the twin carried it


def test_a_value_of_16_mib_rides_the_twin_whole(conn, appended, monkeypatch):
    """A value of 16 MiB goes as one plain argument of the twin and reaches the entry whole."""
    value = "n" * 2**24
    helpers.say_identity(monkeypatch, lambda c: ("w", "", "c", "", "python", value, ""))
    jobs.enqueue(conn, Q, "{}", id="j1")
    admin.pause(conn, Q)
    jobs.remove_job(conn, Q, "j1")
    with pytest.raises(emq.errors.Gone):
        jobs.remove_job(conn, Q, "j1")
    entries = raw(conn)
    assert [(e["verb"], e["outcome"], e["count"]) for e in entries] == [
        ("pause", "done", "0"),
        ("remove", "done", "1"),
        ("remove", "refused:gone", "0"),
    ]
    assert all(e["notebook"] == value and e["conn"] == "c" for e in entries)
    assert appended == []  # each in its transition's own call
    assert conn.client.hget(P + "meta", "paused") == "1" and not conn.client.exists(P + "job:j1")


# -- what an operator types is bounded ------------------------------------------------------


@pytest.mark.parametrize("way", sorted(WAYS))
@pytest.mark.parametrize("size", [100_000, 17 * 2**20])
def test_what_an_operator_types_is_cut_at_max_text(conn, way, size, monkeypatch):
    typed = "r" * (size - 1) + "\U0001f525"
    cut = "r" * audit.MAX_TEXT + "…"
    monkeypatch.setenv("JUPYTERHUB_USER", "u" * 5000)
    jobs.enqueue(conn, Q, "{}", id="j1")
    conn.name, conn.env = "c" * 5000, "e" * 5000
    audit.set_notebook(typed)
    verb, call = WAYS[way]
    audit.identities._identity_of.cache_clear()
    with audit.because(typed):
        call(conn)
    entry = raw(conn)[-1]  # a bulk verb's closing entry, after its `started` one
    assert (entry["verb"], entry["outcome"]) == (verb, "done")
    assert (entry["reason"], entry["notebook"]) == (cut, cut)
    # the typed text outlives its call nowhere (the identity's values are kept for short texts)
    assert audit.identities._identity_of.cache_info().currsize == 0
    assert (entry["who"], entry["conn"], entry["env"]) == tuple(
        x * audit.MAX_TEXT + "…" for x in ("u", "c", "e")
    )
    # the whole entry, and so its one XADD, is a few KB
    assert sum(len(k) + len(v.encode()) for k, v in entry.items()) < 8 * audit.MAX_TEXT
    row = audit.read(conn, Q).iloc[0]
    assert (row.reason, row.notebook) == (cut, cut)
    assert len(connector.client_name(conn)) <= len("emq_notebook::") + 2 * (audit.MAX_ARG + 1)
    conn.reason = None
    audit.set_notebook(None)
    monkeypatch.delenv("JUPYTERHUB_USER")
    call(conn)  # a long connection name and env alone: not kept either
    assert audit.identities._identity_of.cache_info().currsize == 0


def test_a_text_at_max_text_is_kept_whole(conn):
    conn.reason = "r" * audit.MAX_TEXT
    admin.pause(conn, Q)
    assert raw(conn)[0]["reason"] == conn.reason


def test_a_secret_across_the_cut_is_scrubbed_whole(conn):
    secret = "pw-across-the-cut-7Qx"
    session = emq.Connection(conn.client, conn.label, secret=secret)
    session.reason = "x" * (audit.MAX_TEXT - 5) + secret + " tail"
    admin.pause(session, Q)
    reason = raw(conn)[0]["reason"]
    assert reason == "x" * (audit.MAX_TEXT - 5) + "*** t…"
    assert not any(secret[:k] in reason for k in range(4, len(secret) + 1))


def test_a_runbook_with_long_parameters_finds_the_entries_it_wrote(conn):
    params = {f"P{k}": "v" * 500 for k in range(10)} | {"QUEUE": Q, "REASON": "INC-1"}
    audit.runbook("12_retry", params)
    admin.pause(conn, Q)
    [entry] = raw(conn)
    # the runbook's last cell keeps the entries whose notebook is its own (`Runbook.audit`)
    assert entry["notebook"] == audit.notebook()
    assert entry["notebook"].startswith("12_retry.ipynb {") and entry["notebook"].endswith("…")
    assert len(entry["notebook"]) == audit.MAX_TEXT + 1


# -- ids and names at the keyspace's limits -------------------------------------------------


def test_ids_another_node_wrote_are_clipped_in_the_entry_and_whole_in_its_digest(conn, appended):
    ids = ["ord:17", "a b", "nul\x00id", "raw\udcff\udcfe", "\U0001f525", "L" * 5000, "M" * audit.MAX_ARG]
    written_dead(conn, Q, ids)
    answer = admin.reprocess_jobs(conn, Q, [*ids, "x:logs"])
    assert answer == dict.fromkeys(ids, "reprocessed") | {"x:logs": "foreign_id"}
    _, entry = raw(conn)
    said = json.loads(entry["ids"])
    assert (entry["verb"], entry["outcome"], entry["count"]) == ("reprocess", "done", "7")
    assert said["first"] == [*ids[:5], "L" * audit.MAX_ARG + "…", "M" * audit.MAX_ARG]
    assert said["digest"] == audit.digest(ids)
    assert appended == ["reprocess", "reprocess"]  # its `started` entry, then this one
    assert audit.read(conn, Q).ids[0] == [one_line(i) for i in said["first"]]


def test_a_queue_name_and_a_job_id_at_the_gates_limit_are_recorded_whole(conn):
    q, job_id = "q" * MAX_NAME, "j" * MAX_NAME
    jobs.enqueue(conn, q, "{}", id=job_id)
    admin.pause(conn, q)
    jobs.remove_job(conn, q, job_id)
    entries = raw(conn, q)
    assert [(e["verb"], e["outcome"], json.loads(e["ids"])["first"]) for e in entries] == [
        ("pause", "done", []),
        ("remove", "done", [job_id]),
    ]
    assert list(audit.read(conn, q).verb) == ["remove", "pause"]
    assert q in audit.streams(conn)


def test_the_args_column_shows_a_byte_that_is_not_utf8_as_every_column_does(conn):
    """An entry's `args` and `ids` hold text another node wrote; a byte that is not
    UTF-8 reads `\\xNN` there as in the text columns, never as a raw surrogate."""
    args = json.dumps({"note": "by\udcffte", "\udcfekey": ["x\udcff"]}, ensure_ascii=False)
    audit.append(conn, Q, {"verb": "pause", "outcome": "done", "args": args, "reason": "r\udcff"})
    row = audit.read(conn, Q).iloc[0]
    assert row.reason == "r\\xff"
    assert row.args == {"note": "by\\xffte", "\\xfekey": ["x\\xff"]}


# -- the two JSON fields, written without a JSONEncoder a call (audit.entry._text, audit.entry._scalar) --

# every text the fields may hold: surrogates (bytes not UTF-8, read under surrogateescape), controls
_any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), _any_text
)


# an id as the server holds it: any bytes, read under surrogateescape (no other surrogate)
_an_id = st.one_of(
    st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("utf-8", "surrogateescape"))
)


@given(st.lists(_an_id, max_size=120))
def test_the_ids_field_reads_as_the_standard_library_writes_it(ids):
    first = [audit.clipped(scrub(i), audit.MAX_ARG) for i in ids[: audit.FIRST_IDS]]
    meant = {"first": first, "digest": audit.digest(ids)}
    assert audit.ids_field(ids) == json.dumps(meant, ensure_ascii=False)


@given(st.dictionaries(st.text(min_size=1, max_size=20), _scalars, max_size=8))
def test_the_args_field_reads_as_the_standard_library_writes_it(args):
    # what the field says of each option (`_option`), written as json.dumps writes it
    given_ = {k: v for k, v in args.items() if k not in ("conn", "pipeline") and v is not None}
    kept = {k: audit.entry._option(k, v, ()) for k, v in given_.items()}

    class Conn:
        _secrets = ()

    said = audit.options(Conn(), args)  # type: ignore[arg-type]
    assert said == (json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str) if kept else "{}")


@given(_any_text)
def test_a_value_shown_is_one_line_whatever_it_holds(text):
    """`one_line`, what every value of an audit row goes through: no text (controls,
    line and paragraph separators, bytes not UTF-8) breaks it into two lines or leaves
    a character a terminal would act on; plain printable text is shown as it is."""
    shown = one_line(text)
    assert len(shown.splitlines()) <= 1
    assert not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in shown)
    if text.isprintable():
        assert shown == text
