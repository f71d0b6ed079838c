"""A byte-exact picture of a whole server's keyspace, to compare before and after."""

from __future__ import annotations

from typing import Any

from emq_notebook.keyspace import AUDIT_PREFIX


def dump(client: Any) -> dict[str, tuple[str, bytes, int]]:
    """{key: (type, DUMP bytes, PEXPIRETIME)} for every key on the server.

    DUMP is the value byte for byte; PEXPIRETIME is the absolute expiry (-1: none), so a
    lock key's lease compares equal however much time passed between the two dumps.
    The audit trail's streams (`emq:audit:{q}`) are left out: a refused call leaves its
    record there and changes nothing else."""
    keys = sorted(k for k in client.scan_iter(match="*", count=1000) if not k.startswith(AUDIT_PREFIX))
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.type(k)
        pipe.dump(k)
        pipe.execute_command("PEXPIRETIME", k)
    replies = pipe.execute()
    return {k: tuple(replies[3 * i : 3 * i + 3]) for i, k in enumerate(keys)}


def changed(before: dict, after: dict) -> list[str]:
    """The keys that differ, one word each: `+key`, `-key`, `~key`."""
    return sorted(
        [f"+{k}" for k in after.keys() - before.keys()]
        + [f"-{k}" for k in before.keys() - after.keys()]
        + [f"~{k}" for k in before.keys() & after.keys() if before[k] != after[k]]
    )
