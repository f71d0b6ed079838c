"""Triage: find jobs on the server, and group failures by error signature.

Reads only.  `find` filters a state set (or several) in bounded calls of the
`@find` script, so a million dead jobs never block the server in one script and
only the matches cross the wire.  `errors` groups a set's `last_error` texts by
`signature` the same way (`@errors`).  Each call is bounded by its work: at most
`budget` members examined AND `defaults.BYTE_BUDGET` bytes of text read (and, for
`find`, sent back); members with no row and rows that lack the field count too.
What could not keep that bound is refused before any I/O: a budget over
`defaults.MAX_BUDGET`, a glob over `defaults.MAX_GLOB` characters.

The scan keeps its place as (score, member), not as a rank: a job that stays in
the set while others come and go is returned at most once and, unless `limit`
stops the scan, exactly once.

Globs are `fnmatch`'s (`*`, `?`, `[...]`, `[!...]`; case-sensitive; a `^` opening a
class is a literal, as in `fnmatch`) and match the whole field.  The server matches
them without backtracking (lua/includes/glob.lua: text bytes x glob items at most),
character by character as Python decodes the bytes: exactly, but where the text or
the glob holds a byte that is no part of a well-formed UTF-8 character, or where a
match would take more than a call's matching work; there it may let a row through,
so each row the server answers is checked again here with `fnmatch.fnmatchcase`.  A
row that lacks the field a filter reads does not match (an absent `last_error` is
not the empty text).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterable, Iterator

import pandas as pd

from . import checks, decoding, defaults, frames, lanes
from .catalogue import contract
from .checks import whole
from .connector import Connection
from .errors import BadInput
from .frames import _TIMED
from .keyspace import STATES, base, check_name, lane_key, queue_key

DEFAULT_LIMIT = defaults.DEFAULT_LIMIT
DEFAULT_BUDGET = defaults.DEFAULT_BUDGET

# -- globs as the server's matcher reads them -----------------------------------------
# The spec (lua/includes/glob.lua): "G", then per item "*", "?", "L<n>:<n bytes>" (a
# run of literal characters, as sent: text holding undecodable bytes goes as those
# bytes, decoding.wire), "C<lo>-<hi>,...;" (a class: the code points it matches).
_STAR, _ANY = "*", "?"


@functools.lru_cache(maxsize=256)
def _class(text: str) -> tuple[tuple[int, int], ...]:
    """The code points a glob class `[...]` matches, as ranges: fnmatch's own translation
    of the class asked at each code point where its answer can change (0, and each
    character the class names and the one after it), so the ranges are exactly its."""
    probe = re.compile(fnmatch.translate(text))
    named = {ord(c) for c in text}
    points = sorted({0} | named | {c + 1 for c in named if c < 0x10FFFF})
    ranges: list[tuple[int, int]] = []
    for k, lo in enumerate(points):
        if not probe.match(chr(lo)):
            continue
        hi = points[k + 1] - 1 if k + 1 < len(points) else 0x10FFFF
        if ranges and ranges[-1][1] == lo - 1:
            ranges[-1] = (ranges[-1][0], hi)
        else:
            ranges.append((lo, hi))
    return tuple(ranges)


def _items(glob: str) -> Iterator[str | tuple[tuple[int, int], ...]]:
    """The glob's items: `_STAR` (a run of `*` as one), `_ANY`, a class's ranges, or one
    literal character. Classes end where `fnmatch.translate` ends them; an unclosed `[`
    is a literal."""
    i, n, star = 0, len(glob), False
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            if not star:
                yield _STAR
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
                yield "["
            else:
                yield _class(glob[i - 1 : j + 1])
                i = j + 1
        else:
            yield c


def _wire_length(text: str) -> int | None:
    """The bytes `text` is sent as, or None when no text read from a server can hold it
    (a surrogate that stands for no byte)."""
    try:
        return len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return None


def glob_spec(glob: str, what: str = "a glob") -> str:
    """The glob as `@find` reads it (lua/includes/glob.lua): "G", then its items: "*";
    "?"; "L<n>:" and n bytes, a run of literal characters; "C<lo>-<hi>,...;", a class as
    the ranges of code points it matches. Refuses (`BadInput`) a glob over
    `defaults.MAX_GLOB` characters: matching costs a text's bytes times its items."""
    if not isinstance(glob, str):
        raise BadInput(f"a glob is a string, not {type(glob).__name__}")
    if len(glob) > defaults.MAX_GLOB:
        raise BadInput(
            f"{what} is {len(glob):,} characters, over the {defaults.MAX_GLOB:,} a search takes "
            "(matching costs each text's length times the glob's)"
        )
    out, run = ["G"], list[str]()

    def literal() -> None:
        if run:
            text = "".join(run)
            length = _wire_length(text)
            # a character no text holds matches nothing: an empty class says so
            out.append("C;" if length is None else f"L{length}:{text}")
            run.clear()

    for item in _items(glob):
        if isinstance(item, tuple):
            literal()
            out.append("C" + ",".join(f"{lo}-{hi}" for lo, hi in item) + ";")
        elif item is _STAR or item is _ANY:
            literal()
            out.append(item)
        else:
            run.append(item)
    literal()
    return "".join(out)


# -- the sets a search reads -----------------------------------------------------------


def _states(state: str | Iterable[str]) -> tuple[str, ...]:
    chosen = STATES if state == "all" else (state,) if isinstance(state, str) else tuple(state)
    if not chosen:
        raise BadInput("state names at least one of " + ", ".join(STATES))
    for s in chosen:
        if s not in STATES:
            raise BadInput(f"unknown state {s!r}: one of {', '.join(STATES)} or all")
    return tuple(dict.fromkeys(chosen))


# where a paged search resumes: (state, set key, score, member) of the last match taken,
# and for a lane the SSCAN cursor its page of lanes was read from ("" for a state's set)
Place = tuple[str, str, str, str, str]


def _plan(
    conn: Connection, q: str, states: tuple[str, ...], after: Place | None = None
) -> Iterator[tuple[str, str, str, list[str]]]:
    """Every set to read, in order, from where `after` left off: (state, key, the cursor
    its page of lanes was read from ("" for a state's own set), the place in it to read
    on from). A lane's backlog is pending too: after the pending set come the lanes
    holding jobs, a page of lanes at a time as the search reaches them
    (`lanes.with_backlog`, each page by name), never the whole set of known groups.
    Lane names are read from the server and addressed as they are (`keyspace.sets`). A
    lane gone since `after` was taken: the search goes on after it in its page."""
    begin = states.index(after[0]) if after is not None and after[0] in states else 0
    for at in range(begin, len(states)):
        state = states[at]
        flat = queue_key(q, state)
        resuming = after is not None and at == begin
        in_lane = resuming and after is not None and after[1] != flat
        if not in_lane:
            yield state, flat, "", [after[2], after[3]] if resuming and after is not None else ["", ""]
        if state != "pending":
            continue
        page_at, resume_at = (after[4], after[1]) if in_lane and after is not None else ("0", None)
        for g, _, read_from in lanes.with_backlog(conn, q, page_at):
            key = lane_key(q, g, gate=False)
            if resume_at is not None and read_from == page_at:
                if key < resume_at:
                    continue  # shown on a page before
                if key == resume_at and after is not None:
                    yield state, key, read_from, [after[2], after[3]]
                    continue
            yield state, key, read_from, ["", ""]


def _bound(value: object, what: str) -> str:
    return "" if value is None else str(whole(value, what, least=0))


@contract("find")
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
    after: Place | None = None,
) -> pd.DataFrame:
    """The jobs of `state` (a state, a tuple of states, or "all") that pass every filter
    given, as a frame with `frames.snapshot`'s columns indexed by id, at most `limit`
    rows (None: all), in set order.

    `error` and `payload` are globs on the whole `last_error` / `payload` field (a
    payload over `defaults.MAX_WHOLE_FIELD` is not read, and matches no payload glob);
    `group` is the row's group; `min_attempts` the least `attempts`; `created_after`
    (inclusive) and `created_before` (exclusive) are epoch ms against `created_at`.
    The server copies no field over `defaults.BYTE_BUDGET` bytes (another node's worker
    may write one of any size): such a `last_error`, `group`, `attempts` or
    `created_at` matches no filter that reads it (no glob, no signature); a match's
    shown field over it is read here as `frames.snapshot` reads it (`jobs.whole_field`:
    `decoding.not_read` over `defaults.MAX_WHOLE_FIELD`).
    `signature` (extension) keeps the jobs whose `last_error` has that signature (see
    `signature`; the server narrows by `signature_glob`, the signature is checked here);
    `long_error_signature()` keeps those whose `last_error` is over `defaults.BYTE_BUDGET`
    bytes, the rows `errors` counts under it (the server measures each, HSTRLEN, and
    reads none).
    Each call examines at most `budget` members (at most `defaults.MAX_BUDGET`) and
    reads and sends at most about `defaults.BYTE_BUDGET` bytes. Checked before any I/O
    (`BadInput`: a budget over the maximum, a glob over `defaults.MAX_GLOB` characters;
    `InvalidName`). A member with no row is never returned. Reads only: works on a
    read-only connection.

    script: @find
    precondition: none; bounded calls of `budget` members examined
    writes: nothing (a read)
    replies: DataFrame — frames.snapshot's columns, index id, at most `limit` rows, in set
        order
    native: none, a read-only script (FCALL_RO with the function executor)
    """
    check_name(q)
    states = _states(state)
    checks.budget(budget)
    if limit is not None:
        whole(limit, "limit")
    if group is not None:
        check_name(group, "group")
    if signature is not None and not isinstance(signature, str):
        raise BadInput(f"a signature is a string, not {type(signature).__name__}")
    long = signature == long_error_signature()
    narrow = error if error is not None or signature is None or long else signature_glob(signature)
    what = "the error glob" if error is not None else "a signature's glob"
    specs = [
        "" if narrow is None else glob_spec(narrow, what),
        "" if payload is None else glob_spec(payload, "the payload glob"),
    ]
    filters = [
        group or "",
        _bound(min_attempts, "min_attempts"),
        _bound(created_after, "created_after"),
        _bound(created_before, "created_before"),
    ]
    found: dict[str, tuple[str, float, list]] = {}
    place: Place | None = None  # where the next page starts: after the last match taken
    for st, key, page_at, cursor in _plan(conn, q, states, after):
        while limit is None or len(found) < limit:
            want = budget if limit is None else limit - len(found)
            score, member, more, *rows = conn.run(
                "find",
                [key, base(q)],
                [*cursor, budget, defaults.BYTE_BUDGET, want, *specs, *filters, "1" if long else ""],
                verb="find",
                queue=q,
            )
            for job_id, at, *fields in rows:
                if job_id in found:
                    continue
                if len(fields) > len(frames.FIELDS):  # a field too large for the script
                    fields = frames._whole(conn, q, job_id, fields, frames.FIELDS)
                if not _still_matches(fields, narrow, payload, signature):
                    continue
                found[job_id] = (st, float(at), fields)
                place = (st, key, str(at), job_id, page_at)
                if limit is not None and len(found) >= limit:
                    break
            if not more:
                break
            cursor = [score, member]
        if limit is not None and len(found) >= limit:
            break
    else:
        place = None  # every set read to its end: no next page
    frame = _frame(found)
    frame.attrs["next"] = place
    return frame


def _still_matches(fields: list, error: str | None, payload: str | None, sig: str | None) -> bool:
    """The exact check, here, of what the server's matcher lets through."""
    last_error, text = fields[5], fields[7]
    if sig is not None and sig == long_error_signature():
        # no text has it: the server measured this one over the bound (read here whole, or not)
        if not _long_error(last_error):
            return False
        sig = None
    if isinstance(last_error, decoding.NotRead):  # not read: it matches no glob, has no signature
        last_error = None
    return (
        (error is None or (last_error is not None and fnmatch.fnmatchcase(last_error, error)))
        # a payload over MAX_WHOLE_FIELD is not read (`decoding.NotRead`): it matches no glob
        and (
            payload is None
            or (
                text is not None
                and not isinstance(text, decoding.NotRead)
                and fnmatch.fnmatchcase(text, payload)
            )
        )
        and (sig is None or (last_error is not None and signature(last_error) == sig))
    )


def _long_error(last_error: str | None) -> bool:
    """True when a row's `last_error` (as a match shows it) is over `defaults.BYTE_BUDGET`
    bytes: the ones `errors` counts under `long_error_signature()`."""
    if isinstance(last_error, decoding.NotRead):  # over MAX_WHOLE_FIELD
        return True
    return last_error is not None and decoding.wire_size(last_error) > defaults.BYTE_BUDGET


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
# the characters a signature keeps; sent to @errors, which reads a text only that far
SIGNATURE_LENGTH = 200


def _replaced(text: str) -> str:
    """`text` with the signature's replacements made (quoted parts, then UUIDs and hex
    runs, then numbers), before its whitespace is collapsed, stripped and cut: the key
    the `@errors` script groups a text by (a test holds the two together)."""
    text = _QUOTED.sub("<str>", text)
    text = _HEX.sub("<hex>", text)
    return _NUMBER.sub("<num>", text)


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
    return _SPACE.sub(" ", _replaced(text)).strip()[:SIGNATURE_LENGTH]


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


def long_error_signature() -> str:
    """The signature `errors` gives every `last_error` over `defaults.BYTE_BUDGET` bytes,
    whatever its text (`<over 1048576 bytes>`): the server does not copy such a text
    (another node's worker may write one of any size) to key it. It holds digits, so no
    text's own signature is ever the same."""
    return f"<over {defaults.BYTE_BUDGET} bytes>"


ERROR_COLUMNS = ["count", "first_seen", "last_seen", "sample_id", "sample_error"]


@contract("errors")
def errors(
    conn: Connection, q: str, state: str | Iterable[str] = "dead", budget: int = DEFAULT_BUDGET
) -> pd.DataFrame:
    """The `last_error` texts of `state`'s jobs grouped by `signature`: a frame indexed by
    signature with `count`, `first_seen` / `last_seen` (the least and greatest set score,
    as UTC times for the timed sets: died at, due, lease deadline), `sample_id` and
    `sample_error` (the first such job in set order); the largest count first.

    Bounded calls of at most `budget` members (at most `defaults.MAX_BUDGET`, else
    `BadInput` before any I/O) and about `defaults.BYTE_BUDGET` bytes of error text. A
    row without `last_error` counts under the signature ""; a member with no row is not
    counted. A `last_error` over `defaults.BYTE_BUDGET` bytes is not read: it counts
    under `long_error_signature()`, its group's `sample_error` its length
    (`decoding.not_read`). Reads only.

    script: @errors
    precondition: none; bounded calls of `budget` members
    writes: nothing (a read)
    replies: DataFrame by signature — count, first_seen, last_seen, sample_id, sample_error;
        count descending
    native: none, a read-only script (FCALL_RO with the function executor)
    """
    check_name(q)
    states = _states(state)
    checks.budget(budget)
    sigs: dict[str, str] = {}
    groups: dict[str, list] = {}
    long = long_error_signature()
    for st, key, _, _ in _plan(conn, q, states):
        timed = st in _TIMED
        cursor = ["", ""]
        while True:
            score, member, more, *rows = conn.run(
                "errors",
                [key, base(q)],
                [*cursor, budget, defaults.BYTE_BUDGET, SIGNATURE_LENGTH],
                verb="errors",
                queue=q,
            )
            for text_key, n, lo, hi, sample_id, sample_error in rows:
                sig = sigs.get(text_key)
                if sig is None:
                    sig = sigs[text_key] = text_key if text_key == long else signature(text_key)
                if isinstance(sample_error, int):  # its length: the text was not read
                    sample_error = decoding.not_read(sample_error, "BYTE_BUDGET")
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
