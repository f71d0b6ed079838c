"""The do-no-harm harness: a private server per test and a liveness watchdog.

A frozen script holds every client of a real Valkey (PING, workers, SCRIPT KILL
all wait), so a harm test runs each call under `bounded`: a call that has not
returned after `LIVENESS_S` fails the test, and the private server is SIGKILLed by
its own pid so nothing else waits on it. This is a liveness bound, not a timing
assertion: a call that returns in 29 s passes it. After the call the server must
still answer PING (a Lua C-stack overflow kills the process).

On the embedded fakeredis the call runs in a thread (lupa releases the GIL while
Lua runs), so a runaway script fails the test too, though nothing can stop it.

Cost is counted, not timed: `commands_sent` diffs `INFO commandstats` around a call.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import emq_notebook as emq
from emq_notebook import local_valkey

LIVENESS_S = 30.0


@pytest.fixture
def private_valkey() -> Iterator[Any]:
    """A real Valkey for this test alone (a harm test may have to kill it)."""
    srv = local_valkey.start(save="", appendonly="no")
    try:
        yield srv
    finally:
        if srv.is_running():
            srv.stop()


@pytest.fixture(params=("fake", "valkey"))
def harm(request) -> Iterator[tuple[emq.Connection, Any]]:
    """(a flushed connection, its private server or None on the embedded fakeredis)."""
    if request.param == "fake":
        conn = emq.connect(embedded="fake")
        conn.client.flushall()
        yield conn, None
        return
    srv = request.getfixturevalue("private_valkey")
    yield emq.connect(f"redis://127.0.0.1:{srv.port}/0"), srv


def bounded(
    call: Callable[[], Any], srv: Any = None, *, what: str = "the call", seconds: float = LIVENESS_S
) -> Any:
    """Run `call()` and answer what it returns (or raise what it raised); fail the test
    when it has not returned after `seconds` (the server, if any, is SIGKILLed then) or
    when the server no longer answers PING afterwards."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed back to the test's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True, name="bounded-call")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        if srv is not None:
            srv.terminate()
        pytest.fail(
            f"{what} did not return within {seconds:g} s" + ("; the server was killed" if srv else "")
        )
    if srv is not None and not alive(srv):
        pytest.fail(f"the server stopped answering after {what}")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def alive(srv: Any) -> bool:
    """True when the server answers PING within a second."""
    if not srv.is_running():
        return False
    try:
        client = redis.Redis(host="127.0.0.1", port=srv.port, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


def commandstats(client: Any) -> dict[str, int]:
    """Calls per command so far, from `INFO commandstats` ({"scan": 12, ...})."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def commands_sent(client: Any, call: Callable[[], Any]) -> dict[str, int]:
    """The commands the server ran during `call()` (by name, with their counts), less the
    one INFO that reads them. Counted on the server, so pipelined and scripted calls count."""
    before = commandstats(client)
    call()
    after = commandstats(client)
    sent = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    sent["info"] = sent.get("info", 0) - 1
    return {k: n for k, n in sent.items() if n}


def sent(conn: emq.Connection, srv: Any, call: Callable[[], Any]) -> Counter:
    """The commands `call()` sent, by lower-case name: counted by the server on
    Valkey, by a spy on the client's plain and pipelined commands on the fake."""
    if srv is not None:
        return Counter(commands_sent(conn.client, call))
    seen: Counter = Counter()
    with pytest.MonkeyPatch.context() as mp:
        for cls in (redis.Redis, redis.client.Pipeline):
            real = cls.execute_command

            def spy(self: Any, *args: Any, _real: Any = real, **kw: Any) -> Any:
                seen[str(args[0]).lower()] += 1
                return _real(self, *args, **kw)

            mp.setattr(cls, "execute_command", spy)
        call()
    return seen


def written_out(conn, srv, call) -> tuple[Any, int | None]:
    """What `call()` answers, and the bytes the server wrote to its clients meanwhile
    (Valkey's `total_net_output_bytes`; None on the embedded fake)."""
    if srv is None:
        return call(), None
    before = conn.client.info("stats")["total_net_output_bytes"]
    got = call()
    return got, conn.client.info("stats")["total_net_output_bytes"] - before


def replies(conn, name: str) -> list[Any]:
    """Every reply `conn` gets from script `name` from now on, as it comes."""
    seen: list[Any] = []
    real = conn.run

    def run(script, keys, args=(), **kw):
        reply = real(script, keys, args, **kw)
        if script == name:
            seen.append(reply)
        return reply

    conn.run = run
    return seen


class Events:
    """The events published on queue `q`'s channel between `with` and its end."""

    def __init__(self, conn, q: str):
        self.conn, self.channel, self.seen = conn, f"emq:{{{q}}}:events", []

    def __enter__(self) -> Events:
        self.ps = self.conn.client.pubsub()
        self.ps.subscribe(self.channel)
        deadline = time.time() + 5
        while self.ps.get_message(timeout=0.1) is None and time.time() < deadline:
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        marker = f"the end {time.time_ns()}"
        self.conn.client.publish(self.channel, marker)
        deadline = time.time() + 30
        while time.time() < deadline:
            m = self.ps.get_message(timeout=0.1)
            if m and m["type"] == "message":
                if m["data"] == marker:
                    break
                self.seen.append(json.loads(m["data"]))
        else:
            raise AssertionError("the marker never came back")
        self.ps.close()

    def bad_rows(self) -> Counter:
        return Counter(e["job"] for e in self.seen if e["event"] == "bad_row")


class ScriptReads:
    """The reading commands (HMGET, HGET, SORT_RO, with their arguments) each call of the
    named script runs from now on, a list a call: on Valkey every command is logged
    (SLOWLOG, those a script runs too), on the embedded fake its Lua bridge is spied on."""

    READS = ("HMGET", "HGET", "SORT_RO")

    def __init__(self, conn, srv, monkeypatch, name: str):
        self.conn, self.srv, self.calls = conn, srv, []
        self.recording: list | None = None
        if srv is not None:
            conn.client.config_set("slowlog-log-slower-than", 0)
            conn.client.config_set("slowlog-max-len", 100_000)
        else:
            from fakeredis.commands_mixins.scripting_mixin import ScriptingCommandsMixin

            real_call = ScriptingCommandsMixin._lua_redis_call

            def spy(sock: Any, runtime: Any, globs: Any, op: bytes, *args: Any) -> Any:
                if self.recording is not None:
                    self.recording.append([op, *args])
                return real_call(sock, runtime, globs, op, *args)

            monkeypatch.setattr(ScriptingCommandsMixin, "_lua_redis_call", spy)
        real_run = conn.run

        def run(script, keys, args=(), **kw):
            if script != name:
                return real_run(script, keys, args, **kw)
            self.recording = []
            if srv is not None:
                conn.client.execute_command("SLOWLOG", "RESET")
            try:
                return real_run(script, keys, args, **kw)
            finally:
                ran = self.recording
                if srv is not None:
                    # newest first: the script's own commands are logged before it
                    ran = [e[3] for e in reversed(conn.client.execute_command("SLOWLOG", "GET", -1))]
                self.recording = None
                self.calls.append([[_text(w) for w in c] for c in ran if _text(c[0]).upper() in self.READS])

        conn.run = run

    def copied(self) -> list[int]:
        """The bytes each call's reading commands copied, counted against the rows now."""
        return [sum(self._bytes(c) for c in call) for call in self.calls]

    def _bytes(self, command: list[str]) -> int:
        client = self.conn.client
        op, key, *rest = command
        if op.upper() in ("HMGET", "HGET"):
            return sum(client.hstrlen(key, f) for f in rest)
        # SORT_RO set BY nosort LIMIT offset count GET # GET <root>job:*-><field> ...
        offset, count = int(rest[3]), int(rest[4])
        patterns = rest[6::2]
        total = 0
        for member in client.zrange(key, offset, offset + count - 1):
            for p in patterns:
                if p == "#":
                    total += len(member)
                else:
                    row, field = p.split("->", 1)
                    total += client.hstrlen(row.replace("*", member), field)
        return total


def _text(word: Any) -> str:
    return word.decode("utf-8", "surrogateescape") if isinstance(word, bytes) else str(word)
