"""The audit trail: who did what to which queue, when, why, and what came of it.

Every operator write leaves one entry on the server, in the queue's stream
`emq:audit:{q}` (`keyspace.audit_key`): the queue's hash tag, so it lives in the
queue's cluster slot, and outside its footprint `emq:{q}:*`, so the record of an
obliterate survives it. The entry is appended after the transition, beside it, by
`XADD emq:audit:{q} MAXLEN ~ <keep> * field value ...` (the stream id is the server
time); the transition scripts keep their exact writes.

One recorder writes every entry: `recorded(conn, verb, queue, ...)` (a context
manager) or `audited(verb)` (a decorator of a domain verb whose first parameters
are `conn` and the queue). It works out

- `outcome`: `done`; `refused:<reason>` from the typed refusal (`errors.Refused.reason`);
  `unknown` for a call cut by a wire fault (`WireError`) or interrupted (Ctrl-C),
  whose effect the client cannot know; `error` for anything else raised;
- `count` (jobs touched) and `ids` (the first `FIRST_IDS`, and a digest of all) from the
  verb's answer (`touched`), or as the caller says (`Record.touch`);
- `args`: the options given, secrets never (`options`);
- the identity (`identity`): `who`, `acl_user`, `conn`, `env`, `surface`, `notebook`,
  `reason`. Everything but `acl_user` (the server's `ACL WHOAMI`) is what the
  client says of itself.

Bounded whatever an operator types or another node wrote: each identity field is cut
at `MAX_TEXT` characters (1,000) and each option and each of the first ids at
`MAX_ARG` (200), with "…" (`clipped`), so an entry is a few KB at most (about 30 KB
with 100 ids of 200 characters), and so is the one XADD that writes it.

What writes nothing: a request refused as malformed before any write went (`BadInput`,
`UsageProblem`, `InvalidName`: nothing was attempted, and nothing is sent), a read
(only writing verbs are recorded), a dry run
(`dry_run=True`), a read-only session (`conn.read_only`), a call nested in another
recorded call (the outermost records, once: `obliterate_all` is one entry, not one
per call of `obliterate`), and a queue name the gate refuses (no key can name it; the
verb raises `InvalidName` itself).

A failure to write the entry never hides the verb's result nor replaces its
exception. It becomes a one-line note, `audit_failed: <why>`, delivered
- to the surface block around the call (`with surface("magic") as said:` ...
  `said.suffix()`), which prints it on the same line as the verb's result;
- outside any surface block (Python), as an `AuditNotWritten` warning;
- and, when the verb raised, as a note on its exception (`add_note`), so the
  traceback or the one-line error carries it too.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import getpass
import hashlib
import heapq
import inspect
import itertools
import json
import os
import socket
import struct
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pandas as pd

from .checks import whole
from .connector import Beside
from .decoding import LONE_SURROGATE, printable, whole_text, wire_size
from .defaults import AUDIT_KEEP, BYTE_BUDGET
from .errors import EMQError, Halted, InvalidName, Refused, WireError
from .keyspace import AUDIT_MATCH, AUDIT_WHAT, AUDIT_WHO, audit_key, base, check_name, queue_from_audit_key
from .redaction import redact, scrub

if TYPE_CHECKING:
    from .connector import Connection

F = TypeVar("F", bound=Callable[..., Any])

# entries kept per queue (`XADD ... MAXLEN ~`); the `audit_keep` setting feeds `keep`
KEEP = AUDIT_KEEP
# ids written whole in an entry; the digest covers all of them
FIRST_IDS = 100
SURFACES = ("magic", "panel", "runbook", "shell", "python")
# the queue underneath: recorded when an operator typed or clicked them (inside a
# `surface` block), never when a worker or a producer calls them from Python
UNDERNEATH = frozenset({"enqueue", "claim", "complete", "fail"})
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
COLUMNS = (
    "time",
    "queue",
    "verb",
    "outcome",
    "count",
    "who",
    "env",
    "conn",
    "surface",
    "reason",
    "args",
    "ids",
    "notebook",
    "acl_user",
    "ids_digest",
    "entry",
)
# the streams a look at every queue reads are found again at most this often (seconds)
STREAMS_EVERY_S = 60.0
# keys one SCAN call examines when finding the streams
SCAN_COUNT = 10_000
# entries one read answers at most (`read`'s limit)
MAX_READ = 100_000
# entries the first page of a stream asks for: an entry this module writes is about
# 30 KB at most, so about `defaults.BYTE_BUDGET`; each next page of the stream asks for
# as many entries as BYTE_BUDGET holds at the size of the page before, at most PAGE_MOST
# (one XREVRANGE of 100,000 entries of 30 KB would copy 3 GB out of the server at once).
# A page is read on the server an entry at a time within BYTE_BUDGET (`@read_audit`),
# about 5 us an entry: 2,000 small entries a call held Valkey 10.8 ms, 500 keep it near 3
FIRST_PAGE = 32
PAGE_MOST = 500


class AuditNotWritten(UserWarning):
    """A verb ran but its audit entry could not be written (outside a surface block)."""


# -- the surface, the reason, the notebook --------------------------------------------------


@dataclass
class Said:
    """What the records written inside one surface block came to: the entries written
    (`(queue, stream id)`) and the `audit_failed` notes of those that were not."""

    surface: str
    entries: list[tuple[str, str]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def suffix(self) -> str:
        """` · audit_failed: ...` to end the verb's line with, or "" when all were written."""
        return "".join(f" · {note}" for note in self.failed)


_surface: contextvars.ContextVar[Said | None] = contextvars.ContextVar("emq_audit_surface", default=None)
_reason: contextvars.ContextVar[str | None] = contextvars.ContextVar("emq_audit_reason", default=None)
_open: contextvars.ContextVar[Record | None] = contextvars.ContextVar("emq_audit_open", default=None)
# process-wide: a runbook's kernel is a runbook from its first cell on, whatever context
# IPython runs each cell in
_process: dict[str, str | None] = {"surface": "python", "notebook": None}


def _check_surface(name: str) -> str:
    if name not in SURFACES:
        raise ValueError(f"surface is one of {', '.join(SURFACES)}, not {name!r}")
    return name


@contextlib.contextmanager
def surface(name: str) -> Iterator[Said]:
    """Inside the block, records say they came from `name` (`magic`, `panel`, `runbook`,
    `shell`, `python`); yields a `Said` whose `suffix()` the surface prints after the
    verb's result. Nested blocks: the innermost names the surface."""
    said = Said(_check_surface(name))
    token = _surface.set(said)
    try:
        yield said
    finally:
        _surface.reset(token)


def set_default_surface(name: str) -> None:
    """The surface of records made outside any `surface` block in this process
    (`python` unless set; a runbook's kernel sets `runbook`)."""
    _process["surface"] = _check_surface(name)


def typed(name: str) -> str:
    """The surface of a command typed at `name` (`magic`): `runbook` in a runbook's
    kernel, whose cells are the runbook's steps."""
    _check_surface(name)
    return "runbook" if name == "magic" and _process["surface"] == "runbook" else name


def in_surface() -> bool:
    """True inside a `surface` block: an operator typed or clicked the call (the
    queue-underneath verbs are recorded only so: `UNDERNEATH`)."""
    return _surface.get() is not None


def current_surface() -> str:
    said = _surface.get()
    return said.surface if said is not None else str(_process["surface"])


@contextlib.contextmanager
def because(text: str | None) -> Iterator[None]:
    """The reason of the calls inside the block (`--reason TEXT` of one command); it
    goes before the session's (`conn.reason`). None or "" leaves the session's."""
    token = _reason.set(text or None)
    try:
        yield
    finally:
        _reason.reset(token)


def reason_of(conn: Connection) -> str:
    """The reason a record carries: the call's (`because`), else the session's
    (`conn.reason`), else "". Whole: the entry holds it scrubbed, then `clipped`."""
    said = _reason.get() or getattr(conn, "reason", None) or ""
    return str(said)


def clipped(text: str, most: int = MAX_TEXT) -> str:
    """`text` as an entry holds it: whole up to `most` characters, else its first `most`
    and "…"."""
    return text if len(text) <= most else text[:most] + "…"


def set_notebook(path: str | None) -> None:
    """Name the notebook this process runs (a runbook's path and parameters); None
    goes back to what IPython knows (`notebook`)."""
    _process["notebook"] = path or None


def runbook(name: str, params: Mapping[str, Any]) -> None:
    """This kernel runs runbook `name` with `params`: its records say surface `runbook`
    and notebook `<name>.ipynb {"QUEUE": ..., "APPLY": ..., "REASON": ...}` (the
    parameters papermill gave, secrets scrubbed)."""
    set_default_surface("runbook")
    shown = json.dumps({k: _option(k, v, ()) for k, v in params.items()}, sort_keys=True, default=str)
    set_notebook(f"{name}.ipynb {shown}")


def notebook() -> str:
    """The notebook this process runs, when known, as its entries hold it (`clipped` to
    `MAX_TEXT`): the one named (`set_notebook`, `runbook`), else VS Code's
    `__vsc_ipynb_file__`, ipykernel's `__session__` (the path Jupyter Server gives the
    kernel), else `JPY_SESSION_NAME`; "" in a plain process."""
    return clipped(_notebook())


def _notebook() -> str:
    named = _process["notebook"]
    if named:
        return named
    shell = _shell()
    if shell is not None:
        for variable in ("__vsc_ipynb_file__", "__session__"):
            path = shell.user_ns.get(variable)
            if isinstance(path, str) and path:
                return path
    return _environ("JPY_SESSION_NAME")


# the process's environment as os.environ holds it (encoded names and values): a record
# reads two names on every write, and `os.environ.get` of an unset name raises and
# catches a KeyError inside it (0.9 us against 0.05)
_raw_environ: dict[Any, Any] | None = getattr(os.environ, "_data", None)
_encoded = functools.cache(os.environ.encodekey)


def _environ(name: str) -> str:
    """`os.environ.get(name, "")`, read without an exception when unset."""
    if _raw_environ is None:
        return os.environ.get(name, "")
    raw = _raw_environ.get(_encoded(name))
    return "" if raw is None else os.environ.decodevalue(raw)


def _shell() -> Any:
    """The IPython shell this process runs, or None: what `get_ipython()` answers,
    asked of the class (a record asks on every write, and `get_ipython` imports on
    each call); IPython is never imported just to ask."""
    module = sys.modules.get("IPython.core.interactiveshell")
    if module is None:
        return None
    shell = module.InteractiveShell
    return shell.instance() if shell.initialized() else None


# -- identity ------------------------------------------------------------------------------------


def who() -> str:
    """The JupyterHub user (`JUPYTERHUB_USER`) when set, else `user@host` of this process.
    Self-reported: the server cannot check it (`acl_user` it can)."""
    return _environ("JUPYTERHUB_USER") or _user_at_host()


@functools.cache
def _user_at_host() -> str:
    """`user@host` of this process, asked once (a record is made on every write)."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name and no passwd entry (a bare container)
        user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


_UNASKED = object()


def acl_user(conn: Connection) -> str | None:
    """The server's `ACL WHOAMI`, asked once per connection (kept on it); None where the
    server refuses or does not know the command. A wire fault is not kept: asked again."""
    known = getattr(conn, "_audit_acl_user", _UNASKED)
    if known is not _UNASKED:
        return known  # type: ignore[return-value]
    import redis

    try:
        with conn.wire():
            answer = conn.client.execute_command("ACL", "WHOAMI")
    except redis.ResponseError:
        answer = None
    conn._audit_acl_user = None if answer is None else str(answer)  # type: ignore[attr-defined]
    return conn._audit_acl_user  # type: ignore[attr-defined]


def _word(text: str) -> str:
    """`text` as one CLIENT SETNAME word: each character outside `!`..`~` becomes `_`."""
    return "".join(c if "!" <= c <= "~" else "_" for c in text) or "_"


def client_name(conn: Connection) -> str:
    """`emq_notebook:<who>:<conn>`, one word (`CLIENT SETNAME` refuses spaces), each
    part cut at `MAX_ARG` characters (every pooled connection sends it on connect)."""
    return f"emq_notebook:{_word(clipped(who(), MAX_ARG))}:{_word(clipped(conn.name or 'unnamed', MAX_ARG))}"


def _pools(client: Any) -> list[Any]:
    if hasattr(client, "get_nodes"):  # a cluster: each node's own pool
        return [n.redis_connection.connection_pool for n in client.get_nodes() if n.redis_connection]
    pool = getattr(client, "connection_pool", None)
    return [pool] if pool is not None else []


def name_client(conn: Connection) -> str:
    """Name this connection to the server, so `CLIENT LIST` shows who is connected from
    where: `CLIENT SETNAME emq_notebook:<who>:<conn>` now, and each pooled connection
    opened later sends it on connect (redis-py's `client_name`). Answers the name.
    Not a write to the keyspace: a read-only session names itself too. A server that
    refuses it (an ACL without `client`) leaves the connection unnamed, silently."""
    import redis

    name = client_name(conn)
    try:
        with conn.wire():
            conn.client.execute_command("CLIENT", "SETNAME", name)
    except redis.ResponseError:
        # refused: a pooled connection asking it on connect would fail whole, so none asks
        return name
    for pool in _pools(conn.client):
        pool.connection_kwargs["client_name"] = name
        for c in [*getattr(pool, "_available_connections", ()), *getattr(pool, "_in_use_connections", ())]:
            c.client_name = name
    if hasattr(conn.client, "nodes_manager"):
        conn.client.nodes_manager.connection_kwargs["client_name"] = name
    return name


def identity(conn: Connection) -> dict[str, str]:
    """The fields saying who made a record, as the stream holds them ("" for unknown)."""
    return dict(zip(AUDIT_WHO, _who_values(conn), strict=True))


def _who_values(conn: Connection) -> tuple[str, ...]:
    """The values of `identity`, in `AUDIT_WHO`'s order, each `clipped` to `MAX_TEXT`
    (the reason scrubbed whole first, so no cut leaves part of a secret). What each
    comes from is read on every call; the values are worked out once for each
    different reading (`_identity_of`: a record is made on every write), but for a
    reading holding a long text, which is not kept (a 17 MB reason or connection name
    stays no longer than its call)."""
    said = _surface.get()
    texts = (
        _environ("JUPYTERHUB_USER"),
        acl_user(conn) or "",
        conn.name or "",
        conn.env or "",
        said.surface if said is not None else str(_process["surface"]),
        _notebook(),
        reason_of(conn),
    )
    if max(map(len, texts)) > MAX_TEXT:
        return _identity_of.__wrapped__(*texts, conn._secrets)
    return _identity_of(*texts, conn._secrets)


@functools.lru_cache(maxsize=64)
def _identity_of(
    hub_user: str,
    acl: str,
    name: str,
    env: str,
    surface: str,
    path: str,
    reason: str,
    secrets: tuple[str, ...],
) -> tuple[str, ...]:
    """`_who_values` of what each value comes from (the JupyterHub user, the ACL user,
    the connection's name and env, the surface, the notebook, the reason, the secrets
    the reason is scrubbed of)."""
    said = (hub_user or _user_at_host(), acl, name, env, surface, path, scrub(reason, secrets))
    if max(map(len, said)) <= MAX_TEXT:
        return said
    return tuple(map(clipped, said))


# -- what an entry says ---------------------------------------------------------------------------


def touched(result: Any, job: str | None = None) -> tuple[int, list[str]]:
    """(count, ids) of the jobs a verb's answer says it touched:

    - a claim's `Claimed` (`.id`): that job; None with no `job` (nothing to claim, a
      queue verb): none;
    - `{id: word}` (a bulk remove or reprocess): the ids whose word is in `DONE_WORDS`;
    - a list of ids (enqueue_many, tick): those;
    - an int (a drain's count, a `Moved`): that many, ids unknown (`job`'s when named);
    - a str: with `job`, that job (a fail's "retry"/"dead"); obliterate's "ok"/"more":
      none; else the id a verb answers (enqueue, run-now);
    - None (a per-job verb) with `job`: that job.

    A per-job verb (`job` named) touched that one job, whatever it answers (a log's
    line count, a fail's "retry").
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
# (tests/test_audit_values.py keeps them equal): a `JSONEncoder` builds its C encoder
# again on every `encode`, 2 us of a record's few.
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
    an id over `MAX_ARG` characters (another node's) `clipped` there: the digest covers
    it whole, and the field stays within about 20 KB."""
    if not ids:
        return _NO_IDS
    first = ", ".join(_text(clipped(i, MAX_ARG)) for i in ids[:FIRST_IDS])
    return f'{{"first": [{first}], "digest": {_text(digest(ids))}}}'


_NO_IDS = '{"first": [], "digest": ""}'


@functools.cache
def _secret_name(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


def _option(name: str, value: Any, secrets: tuple[str, ...]) -> Any:
    """One option as the record keeps it: a secret as `***`, a job's data by its size, a
    collection by its length, text with URL passwords and the session's secrets out and
    cut to `MAX_ARG` characters."""
    if _secret_name(name) and value not in (None, ""):
        return "***"
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if name in DATA_ARGS:
        size = len(value) if hasattr(value, "__len__") else 1
        return f"<{size:,} {'items' if name == 'payloads' else 'chars'}>"
    if isinstance(value, str):
        text = redact(value) if "://" in value else value
        return clipped(scrub(text, secrets), MAX_ARG)
    if hasattr(value, "__len__"):
        return f"<{len(value):,} items>"
    if isinstance(value, Iterator):  # ids given as a generator: its text is an address
        return f"<{type(value).__name__}>"
    return _option(name, str(value), secrets)


def options(conn: Connection, args: Mapping[str, Any] | None) -> str:
    """The `args` field: the options given, as JSON, secrets never (the code that scrubs
    every other output: `redact` for a URL, the session's secrets, `***` for an option
    named like a secret or a token), callables and the plumbing left out."""
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


# -- the recorder --------------------------------------------------------------------------------

# the queues each server's audit streams were written to by this process (by redacted label)
_written: dict[str, set[str]] = {}
_written_lock = threading.Lock()


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:MAX_ARG]


class Record(Beside):
    """One writing call being recorded, as a context manager (`recorded` is its name
    at the call site):

        with audit.recorded(conn, "pause", q) as rec:
            rec.result = admin.pause(conn, q)

    `args` are the options given (scrubbed: `options`), `job` the one job a per-job
    verb addresses, `keep` the entries kept (`conn.audit_keep`, else `KEEP`),
    `counts(result, job)` reads count and ids from the answer (`touched`).
    Writes nothing for a dry run, on a read-only session, or nested in another record.

    Inside the block, set `.result` to the verb's answer (count and ids come from it,
    `touched`), or call `touch(count, ids)` to say them. On leaving, the entry is
    written (unless the call writes nothing: `.active` is False) and `.entry` holds its
    stream id; `.failed` holds the `audit_failed` note when it could not be written.
    """

    # what a call's record holds until it says otherwise (class defaults: a record is
    # made on every write, and most of these never change in it)
    result: Any = None
    said: tuple[int, list[str]] | None = None
    entry: Any = None
    failed: str | None = None
    active = False
    # as the transition's own call carries the entry (`within`, `Beside`): the stream's
    # key, named once the gate has passed the queue's name (`_records`)
    key = ""
    sent = False
    failure: str | None = None
    # the entry went (or did not) with the transition, in its call (`within`)
    settled = False
    # the connection's writing transitions sent before the call (`_unsent`)
    _writes_before = 0
    _token: contextvars.Token[Record | None] | None = None

    def __init__(
        self,
        conn: Connection,
        verb: str,
        queue: str,
        *,
        args: Mapping[str, Any] | None = None,
        job: str | None = None,
        dry_run: bool = False,
        keep: int | None = None,
        counts: Callable[[Any, str | None], tuple[int, list[str]]] = touched,
    ):
        self.conn, self.verb, self.queue, self.args, self.job = conn, verb, queue, args, job
        self.dry_run, self.counts, self.keep = dry_run, counts, keep

    def touch(self, count: int, ids: Iterable[str] = ()) -> None:
        """Say what the call touched (instead of reading it from `.result`)."""
        self.said = (int(count), [str(i) for i in ids])

    def _records(self) -> bool:
        if self.dry_run or self.conn.read_only or _open.get() is not None:
            return False
        try:
            self.key = audit_key(self.queue)
        except InvalidName:
            return False
        return True

    def __enter__(self) -> Record:
        self.active = self._records()
        if self.active:
            self._writes_before = getattr(self.conn, "writes_sent", 0)
            self._token = _open.set(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        if self.active:
            self._close(exc, stacklevel=4)
        return False

    def _close(self, exc: BaseException | None, stacklevel: int) -> None:
        """The record's end, for a call that ended with `exc` (None: it answered): the
        entry written unless its transition carried it (`settled`) or nothing was sent
        (`_unsent`), and its stream id or `audit_failed` note handed to the surface block,
        the exception or a warning (`stacklevel`: the verb's caller)."""
        assert self._token is not None
        _open.reset(self._token)
        if exc is not None and _unsent(exc) and getattr(self.conn, "writes_sent", 0) == self._writes_before:
            return
        try:
            if not self.settled:
                self.entry = self.write(exc)
        except Exception as fault:
            self.failed = f"audit_failed: {self.verb} {self.queue} not recorded ({_one_line(fault)})"
        said = _surface.get()
        if said is not None:
            if self.entry is not None:
                said.entries.append((self.queue, self.entry))
            if self.failed:
                said.failed.append(self.failed)
        if self.failed:
            if exc is not None:
                exc.add_note(self.failed)
            elif said is None:
                warnings.warn(self.failed, AuditNotWritten, stacklevel=stacklevel)

    def fields(self, exc: BaseException | None) -> dict[str, str]:
        """The entry's fields for a call that ended with `exc` (None: it answered)."""
        outcome = outcome_of(exc)
        count: int | None
        if outcome == "done":
            count, ids = self.said if self.said is not None else self.counts(self.result, self.job)
        elif isinstance(exc, Halted):
            count, ids = exc.moved, []
        else:
            # refused: nothing touched; cut or failed: how much ran is not known
            count = 0 if outcome.startswith("refused") else None
            ids = [self.job] if self.job else []
        return {
            "verb": self.verb,
            "outcome": outcome,
            "count": "" if count is None else str(count),
            "ids": ids_field(ids),
            "args": options(self.conn, self.args),
            **identity(self.conn),
        }

    def kept(self) -> int:
        return whole(
            self.keep if self.keep is not None else getattr(self.conn, "audit_keep", KEEP), "audit_keep"
        )

    def write(self, exc: BaseException | None) -> str:
        """XADD the entry; answers its stream id. A wire fault raises `WireError`."""
        entry = append(self.conn, self.queue, self.fields(exc), self.kept())
        self._noted()
        return entry

    def _noted(self) -> None:
        if self.queue in _written.get(self.conn.label, ()):
            return
        with _written_lock:
            _written.setdefault(self.conn.label, set()).add(self.queue)

    def within(self, call: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        """Run `call(*a, **kw)`, a verb that runs one transition, whose entry that
        transition's own call writes (`Beside`: its audited twin, one round trip where
        `write` after the reply is a second): the entry is there exactly when the
        transition ran, with the outcome its reply says (`done`, `refused:<reason>`,
        `error`), even when the reply is then lost on the wire. A verb that raises
        before its transition goes out, or whose transition has no twin (a native
        command), leaves the record to `write`, after."""
        if not self.active:
            return call(*a, **kw)
        try:
            self.result = self.carrying(call, *a, **kw)
        finally:
            self._settle()
        return self.result

    def carried(self, call: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        """`with self: return self.within(call, *a, **kw)`, in one frame: the path of
        every call of a verb declared `single` (`audited`), where each frame a record
        adds reads several times its cost between two round trips (bench/README.md)."""
        self.__enter__()
        if not self.active:
            return call(*a, **kw)
        try:
            self.result = self.carrying(call, *a, **kw)
        except BaseException as exc:
            self._settle()
            self._close(exc, stacklevel=4)
            raise
        self._settle()
        self._close(None, stacklevel=4)
        return self.result

    def _settle(self) -> None:
        """After the call: when its transition carried the entry (`sent`), the entry is
        settled, its stream id kept, or the `audit_failed` note of why it is not there."""
        if self.sent:
            self.settled = True
            if self.entry:
                self.entry = str(self.entry)
                self._noted()
            else:
                self.entry = None
                if self.failure is not None:
                    why = str(self.failure)[:MAX_ARG]
                    self.failed = f"audit_failed: {self.verb} {self.queue} not recorded ({why})"

    def tail(self, gone: bool) -> bytes:
        """The entry as the audited twin takes it (`includes/audited.lua`), one argument,
        a MessagePack array (`_ENTRY`, then each value `_packed`): verb, the count when
        done, ids, args, keep, '1' when a -1 reply is Gone, then the identity's values in
        `AUDIT_WHO`'s order. The twin works out the outcome, and the count of a call not
        done."""
        who = _packed_who(_who_values(self.conn))
        if self.job is None and not self.args:  # a queue verb's: the same call after call
            return _ENTRY + _queue_what(self.verb, self.counts, self.kept(), gone) + who
        count, ids = self.counts(None, self.job)
        # the ids are new each call; the rest repeat call after call (kept)
        said = _packed_kept((self.verb, str(count)))
        how = _packed_kept((options(self.conn, self.args), str(self.kept()), "1" if gone else ""))
        return _ENTRY + said + _packed((ids_field(ids),)) + how + who


def storable(text: str) -> str:
    """`text` as an entry can hold it: each lone surrogate (half of a pair pasted into a
    reason, which no server can hold) as U+FFFD, the rest unchanged (an undecodable
    byte, read as a surrogate, stays that byte)."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


# the entry the twin takes: a MessagePack array of its values (array 16: 0xdc, then the
# count in 2 bytes), which the server's own `cmsgpack` reads in C (2 us less a call than a
# loop in Lua: bench/README.md); each value a MessagePack str 32 (`_packed`)
_VALUES = 6 + len(AUDIT_WHO)
_ENTRY = b"\xdc" + _VALUES.to_bytes(2, "big")
_str32 = struct.Struct(">BI").pack  # 0xdb and a length: a str 32's head


def _packed(values: Iterable[str]) -> bytes:
    """Each value as a MessagePack str 32: 0xdb, its length in 4 bytes (big-endian), then
    its bytes as the server holds them (an undecodable byte read as a surrogate is that
    byte again; a lone surrogate is U+FFFD: `storable`), which `cmsgpack` hands to Lua
    unchanged, whatever they are. A value of 4 GiB or more cannot be said in 4 bytes:
    `struct.error`, and the entry goes after the bare transition (every value a record
    makes is cut far below: `MAX_TEXT`, `MAX_ARG`)."""
    parts: list[bytes] = []
    for value in values:
        raw = value.encode() if value.isascii() else storable(value).encode("utf-8", "surrogateescape")
        parts += (_str32(0xDB, len(raw)), raw)
    return b"".join(parts)


# the identity packed: the same for every call of a session, so kept; and the values a
# call of a verb says of itself but its ids (its name, its count, its args, keep)
_packed_who = functools.lru_cache(maxsize=64)(_packed)
_packed_kept = functools.lru_cache(maxsize=256)(_packed)


@functools.lru_cache(maxsize=256)
def _queue_what(
    verb: str, counts: Callable[[Any, str | None], tuple[int, list[str]]], keep: int, gone: bool
) -> bytes:
    """What a call of a queue verb with no options says of itself, packed as `Record.tail`
    packs it: the same for each call (pause, resume), so kept."""
    count, ids = counts(None, None)
    return _packed((verb, str(count), ids_field(ids), _NO_ARGS, str(keep), "1" if gone else ""))


def touch(count: int | Callable[[], int], ids: Iterable[str] = ()) -> None:
    """Say what the call being recorded touched, from inside it (a verb whose answer
    does not say it: `obliterate_all` answers its calls). `count` may be a function,
    called only inside a record (a count that reads the server is read only then).
    Outside a record: nothing."""
    rec = _open.get()
    if rec is not None:
        rec.touch(count() if callable(count) else count, ids)


def append(conn: Connection, queue: str, fields: Mapping[str, str], keep: int = KEEP) -> str:
    """`XADD emq:audit:{q} MAXLEN ~ keep * field value ...`; answers the entry's id."""
    flat = [storable(part) for pair in fields.items() for part in pair]
    return str(conn.command("XADD", audit_key(queue), "MAXLEN", "~", keep, "*", *flat))


# the recorder as a call site reads it: `with audit.recorded(conn, verb, q) as rec:`
recorded = Record


def audited(
    verb: str,
    *,
    queue: str = "q",
    job: str | None = None,
    counts: Callable[[Any, str | None], tuple[int, list[str]]] = touched,
    single: bool = False,
) -> Callable[[F], F]:
    """A decorator recording every call of a writing domain verb `fn(conn, q, ...)`:

        @audited("remove", job="job_id")
        def remove_job(conn, q, job_id, dedup=None): ...

    `queue` and `job` name the parameters holding the queue and the one job; the other
    arguments given (not the defaults) are the record's `args`; a true `dry_run`
    argument writes nothing, nor a call queued in its caller's `pipeline` (a producer's
    batch: not run yet). A verb of the queue underneath (`UNDERNEATH`: enqueue, claim,
    complete, fail) is recorded only inside a `surface` block (typed or clicked).
    `single`: the verb runs one transition and its answer says no more than its
    outcome, so that transition's own call writes the entry (`Record.within`)."""

    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)
        first = next(iter(signature.parameters))
        # the arguments given, by name: the parameters a call may fill by position, in order
        by_position = [
            p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        ]
        names = frozenset(signature.parameters)
        required = frozenset(p.name for p in signature.parameters.values() if p.default is p.empty)

        every_position = len(by_position)
        # a call giving at least the required parameters by position, no more than there
        # are, and nothing by name, binds them in order: where every parameter may be given
        # by position or by name, or only by name with a default (else never: -1)
        plain_kinds = all(
            p.kind is p.POSITIONAL_OR_KEYWORD or (p.kind is p.KEYWORD_ONLY and p.default is not p.empty)
            for p in signature.parameters.values()
        )
        least = len(required) if plain_kinds else -1
        # what is not the record's `args`: the connection, the queue, the one job
        not_args = frozenset({first, queue, job})

        def given(a: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
            """What `signature.bind(*a, **kw).arguments` answers, in one step for a call
            that fits (the usual one); `bind` itself otherwise (its TypeError included)."""
            if not kw and 0 <= least <= len(a) <= every_position:
                return dict(zip(by_position, a, strict=False))
            if len(a) <= every_position and names.issuperset(kw):
                bound = dict(zip(by_position, a, strict=False))
                if not kw.keys() & bound.keys() and required.issubset(bound.keys() | kw.keys()):
                    return {**bound, **kw}
            return dict(signature.bind(*a, **kw).arguments)

        underneath = verb in UNDERNEATH
        # a call of the connection, the queue and (a per-job verb) the job, by position
        # and nothing else, the usual one: its parts read straight from `a`
        bare_call = 3 if job is not None and by_position[:3] == [first, queue, job] else 2
        if by_position[:2] != [first, queue] or not 0 <= least <= bare_call:
            bare_call = 0

        @functools.wraps(fn)
        def run(*a: Any, **kw: Any) -> Any:
            if not kw and least <= len(a) <= bare_call:
                conn, q, named, extra = a[0], a[1], (a[2] if len(a) == 3 else None), None
            else:
                try:
                    bound = given(a, kw)
                except TypeError:
                    return fn(*a, **kw)  # let the verb raise its own TypeError
                if bound.get("pipeline") is not None:
                    return fn(*a, **kw)
                conn, q = bound[first], bound.get(queue)
                # the options given (none when only the connection, the queue and the job are)
                plain = len(bound) == 2 or (len(bound) == 3 and job in bound)
                extra = None if plain else {k: v for k, v in bound.items() if k not in not_args}
                named = bound.get(job) if job else None
            if (
                _open.get() is not None
                or not isinstance(q, str)
                or getattr(conn, "read_only", True)
                or (underneath and not in_surface())
            ):
                return fn(*a, **kw)
            rec = recorded(
                conn,
                verb,
                q,
                args=extra,
                job=named if isinstance(named, str) else None,
                dry_run=bool(extra and extra.get("dry_run")),
                counts=counts,
            )
            if single:
                return rec.carried(fn, *a, **kw)
            with rec:
                rec.result = fn(*a, **kw)
            return rec.result

        run.__audited__ = verb  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return wrap


# -- reading it -------------------------------------------------------------------------------------


def streams(conn: Connection, *, rescan: bool = False) -> list[str]:
    """The queues with an audit stream: found by `SCAN MATCH emq:audit:{*} TYPE stream`
    over every primary (one walk of the keyspace, `SCAN_COUNT` keys a call; a key under
    a name `check_name` refuses, another node's, passed over: `_named`), kept on the
    connection and walked again at most every `STREAMS_EVERY_S` seconds (or when
    `rescan`), with the queues this process wrote to since. The queue directory cannot
    answer it: an obliterated queue keeps its stream and has no meta hash."""
    kept = getattr(conn, "_audit_streams", None)
    now = time.monotonic()
    if rescan or kept is None or now - kept[0] >= STREAMS_EVERY_S:
        with conn.wire():
            keys = conn.client.scan_iter(match=AUDIT_MATCH, count=SCAN_COUNT, _type="stream")
            found = {q for q in map(queue_from_audit_key, keys) if q and _named(q)}
        kept = conn._audit_streams = (now, found)  # type: ignore[attr-defined]
    with _written_lock:
        written = set(_written.get(conn.label, ()))
    return sorted(kept[1] | written)


def _named(q: str) -> bool:
    """True for a queue name the toolkit names (`check_name`): another node's stream under
    a name it refuses (`emq:audit:{a b}`, bytes not UTF-8, 1 MB long) is no queue's, no
    verb addresses it, and a read of every queue passes it over rather than fail."""
    try:
        check_name(q)
    except InvalidName:
        return False
    return True


def written(conn: Connection, *also: str) -> list[str]:
    """The queues this process wrote audit entries to on `conn`'s server, and `also`."""
    with _written_lock:
        return sorted(set(_written.get(conn.label, ())) | set(also))


def entry_order(entry: str) -> tuple[int, int]:
    """A stream entry id as a sortable pair (milliseconds, sequence)."""
    return _entry_order(entry)


def _server_ms(conn: Connection) -> int:
    seconds, micros = conn.command("TIME")
    return int(seconds) * 1000 + int(micros) // 1000


def _entry_order(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


def _parsed(text: str, empty: Any) -> Any:
    """A JSON field as shown: each text in it `printable`, as in every other column (a
    byte that is not UTF-8 as `\\xNN`)."""
    if not text:
        return empty
    try:
        return _shown(json.loads(text))
    except ValueError:  # an entry another client wrote by hand: shown as it is
        return printable(text)


def _shown(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


def _row(queue: str, entry: str, fields: Mapping[str, str]) -> dict[str, Any]:
    ids = _parsed(fields.get("ids", ""), {})
    first = ids.get("first", []) if isinstance(ids, dict) else [ids]
    count = fields.get("count", "")
    return {
        "time": pd.Timestamp(_entry_order(entry)[0], unit="ms", tz="UTC"),
        "queue": queue,
        **{name: printable(fields.get(name, "")) for name in ("verb", "outcome")},
        "count": whole_text(count),
        **{name: printable(fields.get(name, "")) for name in ("who", "env", "conn", "surface", "reason")},
        "args": _parsed(fields.get("args", ""), {}),
        "ids": [printable(i) for i in first],
        "notebook": printable(fields.get("notebook", "")),
        "acl_user": printable(fields.get("acl_user", "")),
        "ids_digest": ids.get("digest", "") if isinstance(ids, dict) else "",
        "entry": entry,
    }


def read(
    conn: Connection, queue: str | None = None, *, since_ms: int | None = None, limit: int = 1000
) -> pd.DataFrame:
    """The audit entries, newest first: one queue's, or (None) every queue's with a
    stream (`streams`), at most `limit` in all, and only the last `since_ms`
    milliseconds (by the server's clock) when given. Columns: `time` (UTC, the entry's
    server time), `queue`, `verb`, `outcome`, `count` (NA when not known), `who`, `env`,
    `conn`, `surface`, `reason`, `args` (a dict), `ids` (the first ids, a list), then
    `notebook`, `acl_user`, `ids_digest` and `entry` (the stream id). Text is shown
    with any non-UTF-8 byte as `\\xNN`.

    Bounded by the bytes each call copies, whatever the entries hold: each stream is
    read a page at a time, newest first (`_pages`: `FIRST_PAGE` entries, then as many as
    `defaults.BYTE_BUDGET` bytes hold at the size of the page before), the streams'
    first pages in one pipeline, and a stream's next page only while the newest
    `limit` entries of all may still be in it. Reads only, so it works on a read-only
    session. A `limit` outside 1 to `MAX_READ` is `BadInput`, a bad queue name
    `InvalidName`, before any I/O."""
    whole(limit, "limit", most=MAX_READ)
    if since_ms is not None:
        whole(since_ms, "since_ms", least=0)
    queues = [check_name(queue)] if queue is not None else streams(conn)
    low = "-" if since_ms is None else str(max(0, _server_ms(conn) - since_ms))
    first = min(FIRST_PAGE, limit)
    firsts: list[list] = []
    if queues:
        # the first pages in one pipeline (`@read_audit` reads only: any session)
        pipe = conn.pipeline()
        for q in queues:
            _page(conn, q, "+", low, first, pipe)
        firsts = [
            _page_of(q, page) for q, page in zip(queues, pipe.execute(raise_on_error=False), strict=True)
        ]
    each = [_pages(conn, q, low, limit, page) for q, page in zip(queues, firsts, strict=True)]
    newest = heapq.merge(*each, key=lambda got: _entry_order(got[1]), reverse=True)
    rows = [_row(q, entry, fields) for q, entry, fields in itertools.islice(newest, limit)]
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    frame["count"] = frame["count"].astype("Int64")
    return frame


def _pages(conn: Connection, q: str, low: str, limit: int, page: list) -> Iterator[tuple[str, str, Any]]:
    """Queue `q`'s entries newest first, each as (q, its id, its fields), down to `low`,
    `limit` at most, from its first `page` on: each next page one `@read_audit` call
    from below the last entry read, of as many entries as `defaults.BYTE_BUDGET` bytes
    hold at the size of the page before (`PAGE_MOST` at most), the server stopping once
    they reach BYTE_BUDGET bytes, read only when the entries before are used up."""
    asked, left = min(FIRST_PAGE, limit), limit
    while True:
        yield from ((q, entry, fields) for entry, fields in page)
        left -= len(page)
        size = sum(_entry_size(entry, fields) for entry, fields in page)
        # a page ends short where the range does, or where its bytes reached the budget
        if not page or left <= 0 or (len(page) < asked and size < BYTE_BUDGET):
            return
        asked = min(left, PAGE_MOST, max(1, BYTE_BUDGET * len(page) // max(size, 1)))
        try:
            page = _page_of(q, _page(conn, q, f"({page[-1][0]}", low, asked))
        except EMQError as exc:
            page = _page_of(q, exc)


def _page(conn: Connection, q: str, high: str, low: str, most: int, pipe: Any = None) -> Any:
    """One `@read_audit` call: at most `most` of queue `q`'s entries from `high` down to
    `low`, newest first, read on the server an entry at a time until they reach
    `defaults.BYTE_BUDGET` bytes: one XREVRANGE of a count copied that count of
    entries whatever each holds (30 of 2 MB another node wrote, after 32 small ones:
    Valkey held 40.6 ms). Queued on `pipe` when given."""
    return conn.run(
        "read_audit", [audit_key(q), base(q)], [high, low, most, BYTE_BUDGET], verb="audit", pipeline=pipe
    )


def _page_of(q: str, reply: Any) -> list:
    """A `@read_audit` reply as a page of (id, {name: value}); an error reply (the key
    holds another type than a stream, written by another client) is `EMQError`, naming
    the key."""
    if isinstance(reply, BaseException):
        text = _one_line(reply)
        raise EMQError(f"{audit_key(q)} is not read: {text.split(': ', 1)[-1]}")
    return [(entry, dict(zip(flat[::2], flat[1::2], strict=False))) for entry, flat in reply]


def _entry_size(entry: str, fields: Mapping[str, str]) -> int:
    """The bytes an entry read took on the wire: its id, names and values."""
    return len(entry) + sum(wire_size(name) + wire_size(value) for name, value in fields.items())


def failure_line(exc: BaseException) -> str:
    """The one line of an exception with its audit note, for a surface that prints errors
    as one line (`EMQError: ... · audit_failed: ...`)."""
    notes = [n for n in getattr(exc, "__notes__", ()) if str(n).startswith("audit_failed")]
    head = f"{type(exc).__name__}: {exc}" if isinstance(exc, EMQError) else _one_line(exc)
    return head + "".join(f" · {n}" for n in notes)
