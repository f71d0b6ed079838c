"""Triage: find jobs on the server, and group failures by error signature.

Reads only.  `find` filters a state set (or several) in bounded calls of the
`@find` script, each examining at most `budget` members, so a million dead jobs
never block the server in one script and only the matches cross the wire.
`errors` groups a set's `last_error` texts by `signature` the same way (`@errors`).

The scan keeps its place as (score, member), not as a rank: a job that stays in
the set while others come and go is returned at most once and, unless `limit`
stops the scan, exactly once.

Globs are `fnmatch`'s (`*`, `?`, `[...]`, `[!...]`; case-sensitive; a `^` opening a
class is a literal, as in `fnmatch`) and match the whole field.  Each is
translated to a Lua pattern that matches every text the glob matches: exactly on
ASCII text, and more widely on text with bytes past ASCII (Lua patterns see
bytes, not characters), where each row the server answers is checked again here
with `fnmatch.fnmatchcase`.  A row that lacks the field a filter reads does not
match (an absent `last_error` is not the empty text).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Iterator

import pandas as pd

from . import frames
from .catalogue import document
from .checks import whole
from .connector import Connection
from .errors import BadInput
from .frames import _TIMED
from .keyspace import STATES, base, check_name, lane_key, queue_key

DEFAULT_LIMIT = 1000
DEFAULT_BUDGET = 1000

# -- globs as Lua patterns -----------------------------------------------------------
# Text holding bytes past ASCII is sent as bytes (decoding.wire): a byte 0xNN
# of a pattern is written here as the surrogate "\udcNN".
_HIGH = "\udc80-\udcff"  # any byte past ASCII (a lead or a continuation byte)
_CONTINUATION = "[\udc80-\udcbf]"  # a UTF-8 continuation byte
_ANY = "." + _CONTINUATION + "*"  # one character: a byte and its continuation bytes
_NEVER = "[^%z\x01-\udcff]"  # no byte at all


def _literal(ch: str) -> str:
    """One character of a glob as a Lua pattern item that matches it (and only it)."""
    if ch == "\0":
        return "%z"
    if ord(ch) < 128 and not ch.isalnum():
        return "%" + ch  # `%` before a punctuation mark makes it literal
    return ch


@functools.lru_cache(maxsize=256)
def _class(text: str) -> str:
    """A glob class `[...]` as a Lua pattern item: exact on ASCII (each ASCII character
    tried against fnmatch's own translation of the class), and every character past
    ASCII let through when the class could match one (negated, or naming one)."""
    probe = re.compile(fnmatch.translate(text))
    ascii_ = "".join(_literal(chr(b)) for b in range(128) if probe.match(chr(b)))
    wide = text[1:2] == "!" or any(ord(c) > 127 for c in text)
    if wide:
        return "[" + ascii_ + _HIGH + "]" + _CONTINUATION + "*"
    return "[" + ascii_ + "]" if ascii_ else _NEVER


def _tokens(glob: str) -> Iterator[str | None]:
    """The glob's items as Lua pattern items, None for a `*` (runs of `*` as one).
    Classes end where `fnmatch.translate` ends them; an unclosed `[` is a literal."""
    i, n, star = 0, len(glob), False
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            if not star:
                yield None
            star = True
            continue
        star = False
        if c == "?":
            yield _ANY
        elif c == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                yield _literal("[")
            else:
                yield _class(glob[i - 1 : j + 1])
                i = j + 1
        else:
            yield _literal(c)


def glob_spec(glob: str) -> str:
    """The glob as `@find` reads it (lua/includes/glob.lua): fields split by NUL -- the
    whole anchored pattern and, when the glob has a `*`, the piece before the first
    `*`, the piece after the last, that piece's length in characters, "1" when every
    item is an ASCII literal (the pieces then match byte for byte on any text, so a
    text past ASCII needs no second try with the whole pattern), the pieces between."""
    if not isinstance(glob, str):
        raise BadInput(f"a glob is a string, not {type(glob).__name__}")
    items = list(_tokens(glob))
    whole_ = "^" + "".join(".*" if t is None else t for t in items) + "$"
    if None not in items:
        return whole_
    pieces: list[list[str]] = [[]]
    for t in items:
        if t is None:
            pieces.append([])
        else:
            pieces[-1].append(t)
    prefix, *middle, suffix = pieces
    exact = "1" if all(t is None or _ascii_literal(t) for t in items) else ""
    return "\0".join(
        [whole_, "".join(prefix), "".join(suffix), str(len(suffix)), exact, *("".join(p) for p in middle)]
    )


def _ascii_literal(item: str) -> bool:
    """True for a pattern item `_literal` made of an ASCII character (one byte, matched
    only by itself); False for `?`, a class, or a character past ASCII."""
    return len(item) <= 2 and item.isascii() and item != "."


# -- the sets a search reads -----------------------------------------------------------


def _states(state: str | Iterable[str]) -> tuple[str, ...]:
    chosen = STATES if state == "all" else (state,) if isinstance(state, str) else tuple(state)
    if not chosen:
        raise BadInput("state names at least one of " + ", ".join(STATES))
    for s in chosen:
        if s not in STATES:
            raise BadInput(f"unknown state {s!r}: one of {', '.join(STATES)} or all")
    return tuple(dict.fromkeys(chosen))


def _sets(conn: Connection, q: str, states: tuple[str, ...]) -> list[tuple[str, str]]:
    """(state, key) of every set to read, in order: a lane's backlog is pending too."""
    out = []
    for state in states:
        out.append((state, queue_key(q, state)))
        if state == "pending":
            groups = sorted(conn.command("SMEMBERS", queue_key(q, "groups")) or [])
            out += [("pending", lane_key(q, g)) for g in groups]
    return out


def server_ms(conn: Connection) -> int:
    """The server's clock in epoch ms (the clock `created_at` and the set scores use)."""
    seconds, micros = conn.command("TIME")
    return int(seconds) * 1000 + int(micros) // 1000


def _bound(value: object, what: str) -> str:
    return "" if value is None else str(whole(value, what, least=0))


@document
def find(
    conn: Connection,
    q: str,
    *,
    state: str | Iterable[str] = "dead",
    error: str | None = None,
    payload: str | None = None,
    group: str | None = None,
    min_attempts: int | None = None,
    created_after: int | None = None,
    created_before: int | None = None,
    limit: int | None = DEFAULT_LIMIT,
    budget: int = DEFAULT_BUDGET,
    signature: str | None = None,
) -> pd.DataFrame:
    """The jobs of `state` (a state, a tuple of states, or "all") that pass every filter
    given, as a frame with `frames.snapshot`'s columns indexed by id, at most `limit`
    rows (None: all), in set order.

    `error` and `payload` are globs on the whole `last_error` / `payload` field;
    `group` is the row's group; `min_attempts` the least `attempts`; `created_after`
    (inclusive) and `created_before` (exclusive) are epoch ms against `created_at`.
    `signature` (extension) keeps the jobs whose `last_error` has that signature (see
    `signature`; the server narrows by `signature_glob`, the signature is checked here).
    Checked before any I/O (`BadInput`, `InvalidName`). Reads only: works on a
    read-only connection.
    """
    check_name(q)
    states = _states(state)
    whole(budget, "budget")
    if limit is not None:
        whole(limit, "limit")
    if group is not None:
        check_name(group, "group")
    if signature is not None and not isinstance(signature, str):
        raise BadInput(f"a signature is a string, not {type(signature).__name__}")
    narrow = error if error is not None or signature is None else signature_glob(signature)
    specs = [glob_spec(g) if g is not None else "" for g in (narrow, payload)]
    filters = [
        group or "",
        _bound(min_attempts, "min_attempts"),
        _bound(created_after, "created_after"),
        _bound(created_before, "created_before"),
    ]
    found: dict[str, tuple[str, float, list]] = {}
    for st, key in _sets(conn, q, states):
        cursor = ["", ""]
        while limit is None or len(found) < limit:
            want = budget if limit is None else limit - len(found)
            score, member, more, *rows = conn.run(
                "find", [key, base(q)], [*cursor, budget, want, *specs, *filters], verb="find", queue=q
            )
            for job_id, at, *fields in rows:
                if job_id in found or not _still_matches(fields, narrow, payload, signature):
                    continue
                found[job_id] = (st, float(at), fields)
                if limit is not None and len(found) >= limit:
                    break
            if not more:
                break
            cursor = [score, member]
    return _frame(found)


def _still_matches(fields: list, error: str | None, payload: str | None, sig: str | None) -> bool:
    """The exact check, here, of what the server's patterns let through."""
    last_error, text = fields[5], fields[7]
    return (
        (error is None or (last_error is not None and fnmatch.fnmatchcase(last_error, error)))
        and (payload is None or (text is not None and fnmatch.fnmatchcase(text, payload)))
        and (sig is None or (last_error is not None and signature(last_error) == sig))
    )


def _frame(found: dict[str, tuple[str, float, list]]) -> pd.DataFrame:
    """The same frame `frames.snapshot` builds, from (state, score, row fields) by id."""
    ids = list(found)
    return frames.frame(
        ids,
        [found[i][0] for i in ids],
        [found[i][1] for i in ids],
        [None] * len(ids),
        [[found[i][2] for i in ids]],
    )


# -- error signatures -----------------------------------------------------------------

_QUOTED = re.compile(r"""'[^']*'|"[^"]*\"""")
_HEX = re.compile(
    r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-"
    r"[0-9A-Fa-f]{12}|(?=[A-Fa-f]*[0-9])[0-9A-Fa-f]{8,})(?![0-9A-Fa-f])"
)
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SPACE = re.compile(r"\s+")
SIGNATURE_LENGTH = 200


def signature(text: str) -> str:
    """An error text with its variable parts replaced, so failures of one cause group:
    `'...'` and `"..."` quoted parts -> `<str>`; UUIDs and runs of 8 or more hex
    digits holding a digit -> `<hex>`; the remaining numbers (`42`, `3.5`) -> `<num>`;
    each run of whitespace -> one space; stripped; the first 200 characters.

    Digits are ASCII digits (`[0-9]`). The `@errors` script makes the same replacements
    on the server (a test holds the two together), so only the whitespace, the strip
    and the cut are left to do here.
    """
    if not isinstance(text, str):
        raise BadInput(f"an error text is a string, not {type(text).__name__}")
    text = _QUOTED.sub("<str>", text)
    text = _HEX.sub("<hex>", text)
    text = _NUMBER.sub("<num>", text)
    return _SPACE.sub(" ", text).strip()[:SIGNATURE_LENGTH]


_PLACEHOLDER = re.compile(r"<str>|<hex>|<num>| ")
_GLOB_MAGIC = re.compile(r"([*?\[])")


def signature_glob(sig: str) -> str:
    """A glob that every text with signature `sig` matches (and few others): each
    placeholder and space of the signature a `*`, the rest literal. `find` narrows by it
    on the server and checks the signature itself."""
    if not isinstance(sig, str):
        raise BadInput(f"a signature is a string, not {type(sig).__name__}")
    literal = [_GLOB_MAGIC.sub(r"[\1]", part) for part in _PLACEHOLDER.split(sig)]
    return "*" + "*".join(literal) + "*"


ERROR_COLUMNS = ["count", "first_seen", "last_seen", "sample_id", "sample_error"]


@document
def errors(
    conn: Connection, q: str, state: str | Iterable[str] = "dead", budget: int = DEFAULT_BUDGET
) -> pd.DataFrame:
    """The `last_error` texts of `state`'s jobs grouped by `signature`: a frame indexed by
    signature with `count`, `first_seen` / `last_seen` (the least and greatest set score,
    as UTC times for the timed sets: died at, due, lease deadline), `sample_id` and
    `sample_error` (the first such job in set order); the largest count first.

    Bounded calls of at most `budget` members. A row without `last_error` counts under
    the signature "". Reads only.
    """
    check_name(q)
    states = _states(state)
    whole(budget, "budget")
    sigs: dict[str, str] = {}
    groups: dict[str, list] = {}
    for st, key in _sets(conn, q, states):
        timed = st in _TIMED
        cursor = ["", ""]
        # the shapes of texts the script learned in earlier steps go back with the cursor
        shapes: list = []
        while True:
            score, member, more, learned, *rows = conn.run(
                "errors", [key, base(q)], [*cursor, budget, *shapes], verb="errors", queue=q
            )
            shapes.extend(learned)
            for text_key, n, lo, hi, sample_id, sample_error in rows:
                sig = sigs.get(text_key)
                if sig is None:
                    sig = sigs[text_key] = signature(text_key)
                first, last = (float(lo), float(hi)) if timed else (None, None)
                g = groups.get(sig)
                if g is None:
                    groups[sig] = [int(n), first, last, sample_id, sample_error]
                    continue
                g[0] += int(n)
                if first is not None:
                    g[1] = first if g[1] is None else min(g[1], first)
                    g[2] = last if g[2] is None else max(g[2], last)
            if not more:
                break
            cursor = [score, member]
    # largest count first, then by signature (sorted here: pandas' own sort would build
    # arrow strings, which refuse undecodable bytes)
    records = sorted(((s, *g) for s, g in groups.items()), key=lambda r: (-r[1], r[0]))
    try:
        frame = pd.DataFrame.from_records(records, columns=["signature", *ERROR_COLUMNS])
    except UnicodeEncodeError:  # undecodable bytes, as in `_frame`
        frame = pd.DataFrame(records, columns=["signature", *ERROR_COLUMNS], dtype=object)
    frame["count"] = frame["count"].astype("int64")
    for col in ("first_seen", "last_seen"):
        frame[col] = pd.to_datetime(frame[col].astype("float64"), unit="ms", utc=True)
    return frame.set_index("signature")
