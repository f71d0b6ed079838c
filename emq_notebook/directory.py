"""The queues of one server as this process knows them: found once, then kept.

`Directory.queues()` answers from memory, so a look costs commands by the queues shown,
never by the keys in the database. Discovery (SCAN on every primary, `TYPE hash`,
`MATCH emq:{*}:meta`, `SCAN_COUNT` keys a call) runs whole at first use, when asked
(`rescan()`), and in the background at most once every `RESCAN_EVERY_S` (one SCAN call
a step, `PAUSE_S` apart, on a thread of its own): a look never scans nor waits.

A queue this process names (a transition given it, `Connection.run`; a read of named
counts that finds it) is known at once to every connection of this process to the same
server. Each connection keeps its own directory, shared with its `with_executor` twins.
A whole sweep replaces what was known, keeping the queues named while it ran; a queue
found with no key left leaves the list (`forget`).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import redis

from .defaults import RESCAN_EVERY_S, SCAN_COUNT
from .errors import InvalidName, WireError
from .keyspace import check_name, queue_from_key
from .redaction import scrub

if TYPE_CHECKING:
    from .connector import Connection

# the background sweep's rest between two SCAN calls, so it never holds a server busy
PAUSE_S = 0.002
# every queue has a meta hash: a queue is found by it
MATCH = "emq:{*}:meta"

# stamps of naming and sweeping, one sequence for the process (peers compare them)
_stamps = itertools.count(1)
# the live directories of each server (by its connection's redacted label): a
# queue named through one connection is known to all of them. A tuple, replaced
# whole, so a transition reads it without a lock; a directory that dies leaves it
_servers: dict[str, tuple[weakref.ref[Directory], ...]] = {}
# reentrant: a directory's death (in a garbage collection) may come while it is held
_servers_lock = threading.RLock()


def _join(d: Directory) -> None:
    label = d._label

    def left(ref: weakref.ref[Directory]) -> None:
        with _servers_lock:
            _servers[label] = tuple(r for r in _servers.get(label, ()) if r is not ref)

    with _servers_lock:
        _servers[label] = (*_servers.get(label, ()), weakref.ref(d, left))


def addressable(q: str | None) -> bool:
    """True for a name the toolkit can address (another client's `emq:{a b}:meta`
    is not a queue it can act on, so it is left out rather than failing a list)."""
    if not q:
        return False
    try:
        check_name(q)
    except InvalidName:
        return False
    return True


class _Sweep:
    """One walk over the keyspace, resumable a SCAN call at a time: the primaries
    (None for a plain server), the one being walked and its cursor, what was found,
    and the stamp it began at (queues named after it are kept when it ends)."""

    def __init__(self, nodes: list[Any], began: int):
        self.nodes = nodes
        self.at = 0
        self.cursor = 0
        self.found: set[str] = set()
        self.began = began

    @property
    def done(self) -> bool:
        return self.at >= len(self.nodes)


class Directory:
    """The queues one connection's server holds, as far as this process knows.

    `clock` (seconds, monotonic) decides when a background sweep is due; a test
    gives its own. Thread-safe: the dashboard's refresh, completion and a background
    sweep may look at once."""

    def __init__(self, conn: Connection, *, clock: Callable[[], float] = time.monotonic):
        # the client, not the connection: a directory never keeps its connection alive
        self._client = conn.client
        self._cluster = conn.cluster
        self._label = conn.label
        self._secrets = conn._secrets
        self.clock = clock
        # queue -> the stamp of the last time it was named or found
        self._known: dict[str, int] = {}
        self._lock = threading.RLock()
        self._sweep: _Sweep | None = None
        self._thread: threading.Thread | None = None
        # when the last whole sweep ended (None: never swept)
        self.swept_at: float | None = None
        self.sweeps = 0
        _join(self)

    # -- what a look answers ---------------------------------------------------------
    def queues(self) -> list[str]:
        """Every queue known, sorted. The first look sweeps the keyspace whole; a later
        one starts a background sweep when one is due and answers without waiting."""
        if self.swept_at is None:
            with self._lock:
                if self.swept_at is None:
                    self.rescan()
        elif self.due():
            self._start_background()
        return self.known()

    def known(self) -> list[str]:
        """The queues known now, sorted; no I/O."""
        return sorted(self._known)

    def due(self) -> bool:
        """True when no sweep runs and the last one ended `RESCAN_EVERY_S` ago or more."""
        return (
            self.swept_at is not None and not self.sweeping and self.clock() - self.swept_at >= RESCAN_EVERY_S
        )

    @property
    def sweeping(self) -> bool:
        return self._sweep is not None

    # -- what this process says ------------------------------------------------------
    def stamp(self) -> int:
        """A stamp to take before reading counts: `forget(..., since=stamp)` keeps a
        queue named after it."""
        return next(_stamps)

    def note(self, q: str) -> None:
        """Queue `q` was named or created in this process: known at once, no scan, to
        every directory of the same server."""
        stamp = next(_stamps)
        for ref in _servers.get(self._label, ()):
            peer = ref()
            if peer is not None:
                peer._known[q] = stamp

    def note_all(self, queues: Iterable[str]) -> None:
        for q in queues:
            self.note(q)

    def forget(self, queues: Iterable[str], since: int) -> None:
        """These queues were read with no key left: they leave the list, unless named
        again after `since` (a stamp taken before the read)."""
        with self._lock:
            for q in queues:
                if self._known.get(q, since) < since:
                    del self._known[q]

    # -- discovery ---------------------------------------------------------------------
    def rescan(self) -> list[str]:
        """Sweep the whole keyspace now (a sweep under way starts over) and answer
        every queue known."""
        with self._lock:
            self._sweep = self._new_sweep()
            while not self.step():
                pass
        return self.known()

    def step(self) -> bool:
        """One SCAN call of the sweep under way (one is begun when none is); True when
        that call ended the sweep. A wire fault abandons the sweep (the next is due a
        minute later) and raises `WireError`."""
        with self._lock:
            sweep = self._sweep
            if sweep is None:
                sweep = self._sweep = self._new_sweep()
            try:
                self._scan_once(sweep)
            except BaseException:
                self._end(None)
                raise
            if sweep.done:
                self._end(sweep)
                return True
            return False

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background sweep to end (tests, benchmarks)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _new_sweep(self) -> _Sweep:
        with self._wire():
            nodes: list[Any] = list(self._client.get_primaries()) if self._cluster else [None]
        return _Sweep(nodes, self.stamp())

    @contextlib.contextmanager
    def _wire(self) -> Iterator[None]:
        """A lost server is `WireError`, one line, no secret in it (as `Connection.wire`)."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise WireError(f"lost the server at {self._label}: {scrub(str(exc), self._secrets)}") from None

    def _scan_once(self, sweep: _Sweep) -> None:
        client = self._client
        node = sweep.nodes[sweep.at]
        on = client if node is None else client.get_redis_connection(node)
        with self._wire():
            cursor, keys = on.scan(sweep.cursor, match=MATCH, count=SCAN_COUNT, _type="hash")
        sweep.found.update(q for q in map(queue_from_key, keys) if q and addressable(q))
        sweep.cursor = int(cursor)
        if sweep.cursor == 0:
            sweep.at += 1

    def _end(self, sweep: _Sweep | None) -> None:
        """The sweep under way ended: whole (`sweep`, whose findings replace what was
        known but for the queues named while it ran) or abandoned (None)."""
        self._sweep = None
        if sweep is None:
            # a first sweep that failed is tried again at the next look
            if self.swept_at is not None:
                self.swept_at = self.clock()
            return
        # in place: `note` writes without the lock (a transition never waits on a sweep)
        for q in list(self._known):
            if q not in sweep.found and self._known.get(q, sweep.began + 1) <= sweep.began:
                self._known.pop(q, None)
        for q in sweep.found:
            self._known.setdefault(q, sweep.began)
        self.sweeps += 1
        self.swept_at = self.clock()

    def _start_background(self) -> None:
        with self._lock:
            if self.sweeping or not self.due():
                return
            self._sweep = sweep = self._new_sweep()
        thread = threading.Thread(target=self._background, args=(sweep,), daemon=True, name="emq-directory")
        self._thread = thread
        thread.start()

    def _background(self, sweep: _Sweep) -> None:
        """Walk `sweep` a step at a time, resting between steps; stop when it ends, when
        a rescan replaced it, or at a wire fault (the next sweep is due a minute later)."""
        while True:
            with self._lock:
                if self._sweep is not sweep:
                    return
                try:
                    if self.step():
                        return
                except Exception:  # a lost server: nothing to show it to; the next look says
                    return
            time.sleep(PAUSE_S)
