"""admin.drain and admin.obliterate_all at the default budget on a big backlog,
while a second connection PINGs in a loop: the worst PING latency (the server
must never be blocked for long) and the total time against the floor, ONE
unbounded script doing the same deletes (which blocks the server throughout).

    python bench/destroy.py [--jobs 100000]
    # last line: drain/floor, obliterate/floor and the worst PING while ours ran
"""

from __future__ import annotations

import time

from common import Pinger, args, connect, fill, left_behind, server

from emq_notebook import admin
from emq_notebook.keyspace import base

Q = "bench"
# the floor: the same deletes in one script, no budget (EchoMQ's own @drain, as its Elixir Admin sends it)
UNBOUNDED_DRAIN = """
local ids = redis.call('ZRANGE', KEYS[2], 0, -1)
for _, id in ipairs(ids) do
  local jk = KEYS[1] .. 'job:' .. id
  redis.call('DEL', jk, jk .. ':logs')
end
redis.call('DEL', KEYS[2])
return #ids
"""


def measure(srv, conn, n: int, work) -> tuple[float, float]:
    """Fill `n` pending jobs, then time `work()` under a pinger: (seconds, worst PING)."""
    conn.client.flushall()
    fill(conn, Q, n)
    with Pinger(srv.port) as pinger:
        t = time.perf_counter()
        work()
        took = time.perf_counter() - t
    assert len(left_behind(conn.client)) <= 1, left_behind(conn.client)[:20]
    return took, pinger.worst


def main() -> None:
    a = args(100_000, __doc__)
    keys = [base(Q), base(Q) + "pending"]
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        drain_floor = conn.client.register_script(UNBOUNDED_DRAIN)

        def obliterate():
            admin.pause(conn, Q)
            admin.obliterate_all(conn, Q)

        def obliterate_floor():
            drain_floor(keys=keys)
            conn.client.delete(base(Q) + "meta")

        results = {name: [] for name in ("drain", "drain floor", "obliterate", "obliterate floor")}
        for _ in range(a.repeat):
            results["drain"].append(measure(srv, conn, a.jobs, lambda: admin.drain(conn, Q)))
            results["drain floor"].append(measure(srv, conn, a.jobs, lambda: drain_floor(keys=keys)))
            results["obliterate"].append(measure(srv, conn, a.jobs, obliterate))
            results["obliterate floor"].append(measure(srv, conn, a.jobs, obliterate_floor))
    best = {k: min(t for t, _ in v) for k, v in results.items()}
    worst_ping = {k: max(p for _, p in v) for k, v in results.items()}
    print(f"jobs: {a.jobs:,} pending, default budget {admin.DEFAULT_BUDGET}")
    for k in results:
        print(f"{k:>17}: {best[k]:.3f}s   worst PING meanwhile {worst_ping[k] * 1000:.1f} ms")
    ping_ms = max(worst_ping["drain"], worst_ping["obliterate"]) * 1000
    print(
        f"drain/floor: {best['drain'] / best['drain floor']:.2f}, "
        f"obliterate/floor: {best['obliterate'] / best['obliterate floor']:.2f} (target <= 2.0); "
        f"worst PING during ours: {ping_ms:.1f} ms (target <= 20)"
    )


if __name__ == "__main__":
    main()
