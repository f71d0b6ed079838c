"""A client killed in the middle of a move (tests/test_transfer.py): it moves queue
SOURCE's dead jobs to TARGET in batches of BUDGET and SIGKILLs itself right after its
K-th call to the server (a transition or a plain command) has answered. It prints
`done` only when the move took fewer calls than K.

    python tests/transfer_victim.py URL SOURCE TARGET K BUDGET
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import emq_notebook as emq
from emq_notebook import transfer


def killed_after(conn: emq.Connection, k: int) -> None:
    """`conn`'s calls counted; the process SIGKILLed once the k-th has answered."""
    calls = [0]

    def counted(call: Any) -> Any:
        def run(*a: Any, **kw: Any) -> Any:
            reply = call(*a, **kw)
            calls[0] += 1
            if calls[0] >= k:
                os.kill(os.getpid(), signal.SIGKILL)
            return reply

        return run

    conn.run = counted(conn.run)  # type: ignore[method-assign]
    conn.command = counted(conn.command)  # type: ignore[method-assign]


if __name__ == "__main__":
    url, source, target, k, budget = sys.argv[1:6]
    conn = emq.connect(url)
    killed_after(conn, int(k))
    transfer.move_jobs(conn, source, target, budget=int(budget))
    print("done", flush=True)
