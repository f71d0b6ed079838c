"""What an audit entry says of a call: its outcome, the jobs it touched (`count`,
the first ids and a digest), its options (`args`, secrets never), each value cut
to a bounded length (`clipped`), in the stream's field order (`FIELDS`)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..decoding import LONE_SURROGATE, clipped
from ..defaults import AUDIT_KEEP
from ..errors import EMQError, Refused, WireError
from ..keyspace import AUDIT_WHAT, AUDIT_WHO
from ..redaction import scrub

if TYPE_CHECKING:
    from ..connector import Connection

# entries kept per queue (`XADD ... MAXLEN ~`); the `audit_keep` setting feeds `keep`
KEEP = AUDIT_KEEP
# ids written whole in an entry; the digest covers all of them
FIRST_IDS = 100

# a bulk verb's per-id words that mean the job was touched
DONE_WORDS = frozenset({"reprocessed", "removed"})
# what a bounded bulk verb answers that names no job: obliterate's "more" and "ok"
_NO_JOB = frozenset({"ok", "more"})
# a value longer than this is cut in `args`, and so is an id in `ids` (the digest covers it whole)
MAX_ARG = 200
# an identity field longer than this is cut, with "…": `reason`, `notebook` (a runbook's
# parameters), `who`, `acl_user`, `conn`, `env`. What an operator types never makes an
# entry more than a few KB (a 17 MB --reason is not a 17 MB XADD holding the server)
MAX_TEXT = 1000
# args that hold a job's data rather than an option: their size is recorded, never their text
DATA_ARGS = frozenset({"payload", "payloads", "line", "data"})
# args whose name says secret: `***` (the URL query words `redact` treats so, and the claim token)
_SECRET_WORDS = ("password", "pass", "passwd", "pwd", "secret", "token", "auth")
# args that are the call's plumbing, not its options
_PLUMBING = frozenset({"conn", "pipeline"})
# the stream field order, and the frame's columns (the contract's, then what else an entry holds)
FIELDS = AUDIT_WHAT + AUDIT_WHO
# the outcome of the entry a bulk verb writes before its first writing call, and the field
# of its closing entry naming it (that entry's stream id)
STARTED = "started"
# what a bulk verb does to a job, as the line of the exception that ended it says it
_DOING = {"drain": "draining", "obliterate": "deleting", "remove": "removing", "reprocess": "moving"}


def _doing(verb: str) -> str:
    return _DOING.get(verb, "changing")


# -- what an entry says ---------------------------------------------------------------------------


def touched(result: Any, job: str | None = None) -> tuple[int, list[str]]:
    """(count, ids) of the jobs a verb's answer says it touched: a `Claimed`, that job;
    a per-job verb (`job` named), that job whatever it answers; `{id: word}`, the ids
    whose word is in `DONE_WORDS`; a list of ids, those; an int, that many (ids
    unknown); obliterate's "ok"/"more", none; another str, the id answered; None, none.
    """
    job_id = getattr(result, "id", None)
    if isinstance(job_id, str):
        return 1, [job_id]
    if job:
        return 1, [job]
    if result is None or isinstance(result, bool):
        return 0, []
    if isinstance(result, Mapping):
        done = [str(i) for i, word in result.items() if word in DONE_WORDS]
        return len(done), done
    if isinstance(result, int):
        return int(result), []
    if isinstance(result, str):
        return (0, []) if result in _NO_JOB else (1, [result])
    if isinstance(result, (list, tuple)) and all(isinstance(i, str) for i in result):
        return len(result), list(result)
    return 0, []


def digest(ids: Iterable[str]) -> str:
    """`sha256:` and the first 16 hex digits of the SHA-256 of the ids, one a line, in
    the order given ("" for none); an id's bytes as the server holds them."""
    chosen = list(ids)
    if not chosen:
        return ""
    text = "\n".join(chosen).encode("utf-8", "surrogateescape")
    return "sha256:" + hashlib.sha256(text).hexdigest()[:16]


# The entry's two JSON fields are flat: `ids` a list of texts and a digest, `args` one
# level of the scalars `_option` answers. Each text is written by the standard library's
# own string encoder, so a field reads as `json.dumps(..., ensure_ascii=False)` writes it
# (tests/test_audit_entry.py keeps them equal); a `JSONEncoder` would build its C
# encoder again on every `encode`.
_text = json.encoder.encode_basestring
# what `_scalar` leaves to the standard library: a float (NaN and the infinities as it writes them)
_json = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _scalar(value: Any) -> str:
    """One value of `args` as JSON."""
    if isinstance(value, str):
        return _text(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    return _json(value)


def ids_field(ids: list[str]) -> str:
    """The `ids` field: JSON `{"first": [the first FIRST_IDS ids], "digest": digest(all)}`,
    each of the first as every text is recorded (`scrub`: an id another node wrote
    holding a URL's password shows none) and, over `MAX_ARG` characters, `clipped`:
    the digest covers every id whole, and the field stays within about 20 KB."""
    if not ids:
        return _NO_IDS
    first = ", ".join(_text(clipped(scrub(i), MAX_ARG)) for i in ids[:FIRST_IDS])
    return f'{{"first": [{first}], "digest": {_text(digest(ids))}}}'


_NO_IDS = '{"first": [], "digest": ""}'


@functools.cache
def _secret_name(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


def _option(name: str, value: Any, secrets: tuple[str, ...]) -> Any:
    """One option as the record keeps it: a secret as `***`, a job's data by its size, a
    collection by its length, text with URL passwords and the session's secrets out
    (`scrub`) and cut to `MAX_ARG` characters."""
    if _secret_name(name) and value not in (None, ""):
        return "***"
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if name in DATA_ARGS:
        size = len(value) if hasattr(value, "__len__") else 1
        return f"<{size:,} {'items' if name == 'payloads' else 'chars'}>"
    if isinstance(value, str):
        return clipped(scrub(value, secrets), MAX_ARG)
    if hasattr(value, "__len__"):
        return f"<{len(value):,} items>"
    if isinstance(value, Iterator):  # ids given as a generator: its text is an address
        return f"<{type(value).__name__}>"
    return _option(name, str(value), secrets)


def options(conn: Connection, args: Mapping[str, Any] | None) -> str:
    """The `args` field: the options given, as JSON, secrets never (`scrub`, the code
    that scrubs every other output: each URL's password, the session's secrets; and
    `***` for an option named like a secret or a token), callables and the plumbing
    left out."""
    if not args:
        return _NO_ARGS
    kept = {
        name: _option(name, value, conn._secrets)
        for name, value in (args or {}).items()
        if name not in _PLUMBING and value is not None and not callable(value)
    }
    if not kept:
        return _NO_ARGS
    return "{" + ", ".join(f"{_text(name)}: {_scalar(kept[name])}" for name in sorted(kept)) + "}"


_NO_ARGS = "{}"


def _unsent(exc: BaseException | None) -> bool:
    """True for a request the verb refused as malformed (`BadInput`, `UsageProblem`,
    `InvalidName`: an `EMQError` that is a `ValueError`): when no writing transition
    went before it, nothing was attempted, so nothing is recorded. One raised after a
    call that wrote (a bulk verb's later chunk) is recorded as `error`."""
    return isinstance(exc, EMQError) and isinstance(exc, ValueError)


def outcome_of(exc: BaseException | None) -> str:
    """`done`, `refused:<reason>`, `unknown` (a wire fault or an interrupt: the call may
    or may not have run) or `error`."""
    if exc is None:
        return "done"
    if isinstance(exc, Refused):
        return f"refused:{exc.reason}"
    if isinstance(exc, WireError) or not isinstance(exc, Exception):
        return "unknown"
    return "error"


def storable(text: str) -> str:
    """`text` as an entry can hold it: each lone surrogate (half of a pair pasted into a
    reason, which no server can hold) as U+FFFD, the rest unchanged (an undecodable
    byte, read as a surrogate, stays that byte)."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:MAX_ARG]
