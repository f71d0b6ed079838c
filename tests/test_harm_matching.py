"""Do no harm, matching (issue 27, SPEC 11): the error texts and globs that froze,
crashed or held a server for seconds go through `errors` and `find` in bounded calls,
and the server still answers. Each call runs under `bounded` (a 30 s liveness bound
that kills a frozen private server, and a PING after), on both backends. The answers
are checked against Python's own `signature` and `fnmatch.fnmatchcase`."""

from __future__ import annotations

import fnmatch
import random
import re

import pytest
from harm import bounded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emq_notebook as emq
from emq_notebook import decoding, defaults, scripts, triage
from emq_notebook.errors import BadInput

Q = "harm"
DEAD = f"emq:{{{Q}}}:dead"
ROOT = f"emq:{{{Q}}}:"

LOG_LINES = [
    "2024-05-01T12:34:56.789Z upstream 10.20.30.40:6379 timed out after 1500 ms",
    "2024-05-01T12:35:07.123Z upstream 10.20.30.41:6379 refused connection",
]


def put_dead(conn, texts: list[str | bytes], first: int = 1_000) -> list[str]:
    """One dead row a text (bytes go as they are), scored in order; their ids."""
    pipe = conn.client.pipeline(transaction=False)
    ids = []
    for i, text in enumerate(texts):
        job_id = f"j_{i:04d}"
        error = text if isinstance(text, bytes) else decoding.wire(text)
        pipe.hset(ROOT + "job:" + job_id, mapping={"last_error": error, "payload": "{}", "attempts": "1"})
        pipe.zadd(DEAD, {job_id: first + i})
        ids.append(job_id)
    pipe.execute()
    return ids


def read(text: str | bytes) -> str:
    """A text as the toolkit reads it back (bytes that are not UTF-8 as surrogates)."""
    return text.decode("utf-8", decoding.ERRORS) if isinstance(text, bytes) else text


def signatures(texts: list[str | bytes]) -> dict[str, int]:
    """How many of `texts` have each signature, by Python's `triage.signature`."""
    counts: dict[str, int] = {}
    for text in texts:
        sig = triage.signature(read(text))
        counts[sig] = counts.get(sig, 0) + 1
    return counts


def errors_of(conn, srv) -> dict[str, int]:
    got = bounded(lambda: triage.errors(conn, Q), srv, what="errors()")
    return got["count"].to_dict()


def found(conn, srv, **how) -> list[str]:
    got = bounded(lambda: triage.find(conn, Q, limit=None, **how), srv, what=f"find({how})")
    return list(got.index)


def matching(ids: list[str], texts: list[str | bytes], glob: str) -> list[str]:
    return [i for i, t in zip(ids, texts, strict=True) if fnmatch.fnmatchcase(read(t), glob)]


# -- the error signature ------------------------------------------------------------------


def test_two_log_lines_group_in_errors_and_the_server_answers(harm):
    """Two ordinary log lines (a timestamp, an address, a port, a duration) group by
    their signatures: a pattern with runs like `%d%d?%d?` built from one of them would
    backtrack through ~10^10 paths on the other."""
    conn, srv = harm
    put_dead(conn, LOG_LINES)
    assert errors_of(conn, srv) == signatures(LOG_LINES)
    assert set(signatures(LOG_LINES)) == {
        "<num>-<num>-<num>T<num>:<num>:<num>Z upstream <num>.<num>:<num> timed out after <num> ms",
        "<num>-<num>-<num>T<num>:<num>:<num>Z upstream <num>.<num>:<num> refused connection",
    }


def log_texts() -> list[str]:
    """Log-style error texts: timestamps, IPs and numbers in several formats, many times
    over with their numbers changed (one family each), and long ones."""
    rng = random.Random(27)
    texts = []
    for i in range(120):
        ms, port = rng.randrange(10_000), rng.randrange(1, 65_536)
        ip = ".".join(str(rng.randrange(256)) for _ in range(4))
        at = f"2024-05-{1 + i % 28:02d}T12:{i % 60:02d}:{i % 60:02d}.{ms % 1000:03d}Z"
        texts += [
            f"{at} upstream {ip}:{port} timed out after {ms} ms",
            f"[{1714566896 + i}] WARN pool-{i % 7}-thread-{i % 13} retry {i % 5}/5 in {ms / 7:.3f}s",
            f'May  1 12:34:{i % 60:02d} host{i} sshd[{40_000 + i}]: Failed password for "ops{i}" '
            f"from {ip} port {port} ssh2",
            f"HTTP/1.1 {500 + i % 4} from [2001:db8::{i:x}]:{port} after {ms}µs; "
            f"1,{i:03d},000 bytes; -{i}.{ms} ratio 1e-{i % 9}",
            f"request 123e4567-e89b-12d3-a456-{i:012x} v1.2.{i} build 0x{ms:08x} "
            f"sha {rng.getrandbits(64):016x}",
        ]
    texts.append("x" * 5_000 + " at 12:00:00.123 " * 300)  # long: read only until its key shows enough
    texts.append(" ".join(str(n) for n in range(20_000)))  # dense with numbers
    return texts


def test_log_style_texts_group_as_the_signature_does(harm):
    conn, srv = harm
    texts = log_texts()
    put_dead(conn, texts)
    assert errors_of(conn, srv) == signatures(texts)


def test_a_100kb_run_of_digits_ending_in_minus_1_1(harm):
    """`%d+%.%d+` over a long digit run with no dot would be quadratic; one pass is not."""
    conn, srv = harm
    texts = ["1" * 100_000 + "-1.1", "9" * 100_000, "." + "1" * 100_000 + "."]
    ids = put_dead(conn, texts)
    assert errors_of(conn, srv) == signatures(texts)
    for glob in ("*-1.1", "*-1.2", "1*1", "*[0-9]", "*.?"):
        assert found(conn, srv, error=glob) == matching(ids, texts, glob), glob


NOT_UTF8 = [
    b"\xff\xfe timeout 123 \xc3",
    b"caf\xc3\xa9 42 'quoted \xff' done",
    b"\x80" * 1_000 + b"9 deadbeef1 \xe2\x82",
    b"\xed\xa0\x80 surrogate bytes 3.14 \xf4\x90\x80\x80",
]


def test_texts_of_bytes_that_are_not_utf8(harm):
    conn, srv = harm
    ids = put_dead(conn, NOT_UTF8)
    assert errors_of(conn, srv) == signatures(NOT_UTF8)
    for glob in ("*42*", "?*", "*[\udcff]*", "*\udcc3", "caf? *", "[!a-z]*", "*?\udc82"):
        assert found(conn, srv, error=glob) == matching(ids, NOT_UTF8, glob), glob


# -- globs ------------------------------------------------------------------------------


def test_a_thousand_character_glob_against_100kb_texts_returns(harm):
    conn, srv = harm
    rng = random.Random(1000)
    texts = ["a" * 100_000, "ab" * 50_000, "x" * 99_999 + "é", "?" * 100_000]
    ids = put_dead(conn, texts)
    items = ["?", "*", "[a-z]", "[!x]", "?", "a", "[ab]"]
    globs = [
        "?" * defaults.MAX_GLOB,
        "*" + "[a-y]?" * 166 + "x",
        "".join(rng.choice(items) for _ in range(defaults.MAX_GLOB))[: defaults.MAX_GLOB],
        ("*a" * 500)[: defaults.MAX_GLOB],
    ]
    for glob in globs:
        assert len(glob) <= defaults.MAX_GLOB
        assert found(conn, srv, error=glob) == matching(ids, texts, glob), glob[:40]


def test_timeout_retry_glob_over_tracebacks_with_one_non_ascii_character(harm):
    """Classes between stars over 18 KB texts past ASCII: a whole anchored pattern would
    be polynomial in the text; the matcher finds `imeout` and `etry` with plain finds."""
    conn, srv = harm
    rng = random.Random(18)
    texts = []
    for i in range(100):
        frames = "".join(
            f'  File "/srv/app/module_{j}.py", line {rng.randrange(2_000)}, in handle_{j}\n'
            "    value = call(x)\n"
            for j in range(240)
        )
        cut = rng.randrange(len(frames))
        body = "Traceback (most recent call last):\n" + frames[:cut] + "é" + frames[cut:]
        tail = "TimeoutError: gave up, will retry" if i % 7 == 0 else "ValueError: bad input"
        texts.append(body[: 18_000 - len(tail)] + tail)
    ids = put_dead(conn, texts)
    glob = "*[Tt]imeout*[Rr]etry*"
    got = found(conn, srv, error=glob)
    assert got == matching(ids, texts, glob) and len(got) == 15


def test_a_glob_over_the_longest_is_refused_before_any_io():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    for how in ({"error": "?" * 100_000}, {"payload": "*" * (defaults.MAX_GLOB + 1)}):
        with pytest.raises(BadInput, match=f"{defaults.MAX_GLOB:,}") as refused:
            triage.find(nowhere, Q, **how)
        assert "\n" not in str(refused.value)
    with pytest.raises(BadInput, match="a signature's glob"):
        triage.find(nowhere, Q, signature="<num>*" * 400)
    triage.glob_spec("?" * defaults.MAX_GLOB)  # the longest is taken


def test_a_budget_over_the_maximum_is_refused_before_any_io():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    for call in (triage.find, triage.errors):
        with pytest.raises(BadInput, match=f"{defaults.MAX_BUDGET:,}"):
            call(nowhere, Q, budget=defaults.MAX_BUDGET + 1)


# -- bounded by work ----------------------------------------------------------------------


def step(conn, script: str, budget: int, byte_budget: int, *rest) -> list:
    """One call of @errors or @find from the start of dead."""
    return conn.run(script, [DEAD, ROOT], ["", "", budget, byte_budget, *rest], verb=script, queue=Q)


FIND_ANY = [1000, "", "", "", "", "", ""]  # limit, then no filter


def test_a_step_stops_at_its_byte_budget_and_the_scan_goes_on_from_there(harm):
    conn, srv = harm
    texts = [f"boom {i} " + "x" * 100_000 for i in range(30)]
    ids = put_dead(conn, texts)
    # 100 KB a text against 250 KB: the third's would pass it, so the step ends before it
    score, member, more, *groups = bounded(
        lambda: step(conn, "errors", 1000, 250_000, triage.SIGNATURE_LENGTH), srv
    )
    assert (member, more) == (ids[1], 1) and [g[1] for g in groups] == [2]
    # find reads no text with no filter, and sends its matches' fields while they fit:
    # the third's text goes by its place (9: the caller reads it), and the step ends there
    score, member, more, *rows = bounded(lambda: step(conn, "find", 1000, 250_000, *FIND_ANY), srv)
    assert member == ids[2] and more == 1 and [len(r) for r in rows] == [10, 10, 11]
    assert rows[2][7] is None and rows[2][10] == 6
    assert errors_of(conn, srv) == signatures(texts)
    assert found(conn, srv) == ids


def test_members_with_no_row_and_rows_with_no_error_cost_budget(harm):
    conn, srv = harm
    conn.client.zadd(DEAD, {f"ghost_{i:03d}": i for i in range(50)})  # ahead of the rows
    ids = put_dead(conn, ["boom 1", "boom 2"])
    conn.client.hdel(ROOT + "job:" + ids[0], "last_error")
    score, member, more, *groups = bounded(
        lambda: step(conn, "errors", 10, 1 << 20, triage.SIGNATURE_LENGTH), srv
    )
    assert (member, more, groups) == ("ghost_009", 1, [])
    score, member, more, *rows = bounded(lambda: step(conn, "find", 10, 1 << 20, *FIND_ANY), srv)
    assert (member, more, rows) == ("ghost_009", 1, [])
    assert errors_of(conn, srv) == {"": 1, "boom <num>": 1}
    assert found(conn, srv) == ids and found(conn, srv, min_attempts=0) == ids


# -- the server's matcher and keyer against Python, on drawn input --------------------------

MATCH = "".join(
    (scripts.lua_dir() / "includes" / f"{n}.lua").read_text() for n in ("utf8_char", "glob_spec", "glob")
) + ("\nlocal said = glob_matches(ARGV[1], glob_of(ARGV[2]), {steps = 1e9})\nreturn said and 1 or 0")
UNDECODABLE = re.compile("[\udc80-\udcff]")
CHARS = st.sampled_from(list("ab?*[]!-^x.\\ é€") + ["\udcff", "\udcc3", "\udca9", "😀"])


def canonical(text: str) -> str:
    return text.encode("utf-8", decoding.ERRORS).decode("utf-8", decoding.ERRORS)


drawn = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@drawn
@given(st.text(CHARS, max_size=14).map(canonical), st.text(CHARS, max_size=10))
def test_the_matcher_with_the_check_after_it_is_fnmatchcase(conn, text, glob):
    """The server's matcher lets through every text fnmatch matches, and nothing else
    unless the text or the glob holds a byte that is no part of a well-formed UTF-8
    character (a literal such byte can match inside a character); what it lets through
    then, `find`'s check after it settles."""
    expected = fnmatch.fnmatchcase(text, glob)
    said = conn.client.eval(MATCH, 0, decoding.wire(text), decoding.wire(triage.glob_spec(glob)))
    if expected:
        assert said == 1
    elif not UNDECODABLE.search(text + glob):
        assert said == 0
    conn.client.delete(DEAD)
    put_dead(conn, [text])
    assert (triage.find(conn, Q, error=glob).index.tolist() == ["j_0000"]) is expected
