"""A queue's keyspace footprint, and what a transition changed in it.

Reads every key under `emq:{q}:` (SCAN, never KEYS), so the console can show
the keys and fields a verb wrote or deleted, and a runbook can show a footprint
of zero after an obliterate. `keyspace` reads any set of keys the same way (the
tests byte-compare the whole keyspace before and after a refusal with it).
"""

from __future__ import annotations

from .connector import Connection
from .keyspace import base


def footprint(conn: Connection, q: str) -> dict[str, tuple[str, object]]:
    """{key: (type, value)} for every key of queue `q`."""
    return keyspace(conn, base(q) + "*")


def keyspace(conn: Connection, match: str = "*", *, expiry: bool = False) -> dict[str, tuple]:
    """{key: (type, value)} for every key matching `match`, in key order, read in
    two pipelines (types, then values); a set's members sorted. With `expiry`, a
    third item: whether the key has a time to live (a held lock)."""
    keys = sorted(conn.scan(match))
    pipe = conn.pipeline()
    for k in keys:
        pipe.type(k)
    kinds = pipe.execute()
    read = {
        "hash": lambda p, k: p.hgetall(k),
        "zset": lambda p, k: p.zrange(k, 0, -1, withscores=True),
        "list": lambda p, k: p.lrange(k, 0, -1),
        "set": lambda p, k: p.smembers(k),
        "string": lambda p, k: p.get(k),
    }
    pipe = conn.pipeline()
    for k, kind in zip(keys, kinds, strict=True):
        read.get(kind, lambda p, k: p.type(k))(pipe, k)
        if expiry:
            pipe.pttl(k)
    values = pipe.execute()
    if not expiry:
        return {
            k: (kind, sorted(v) if kind == "set" else v)
            for k, kind, v in zip(keys, kinds, values, strict=True)
        }
    return {
        k: (kind, sorted(v) if kind == "set" else v, ttl > 0)
        for k, kind, v, ttl in zip(keys, kinds, values[::2], values[1::2], strict=True)
    }


def diff(before: dict, after: dict) -> list[str]:
    """One line per change: `+ key`, `- key`, `~ key field: old -> new`, `~ key +member`."""
    lines: list[str] = []
    for key in sorted(set(before) | set(after)):
        if key not in before:
            lines.append(f"+ {key} ({after[key][0]})")
        elif key not in after:
            lines.append(f"- {key}")
        elif before[key] != after[key]:
            (kind, old), (_, new) = before[key], after[key]
            if kind == "hash":
                for f in sorted(set(old) | set(new)):
                    if old.get(f) != new.get(f):
                        lines.append(f"~ {key} {f}: {old.get(f, '∅')} -> {new.get(f, '∅')}")
            elif kind == "zset":
                o, n = dict(old), dict(new)
                lines += [f"~ {key} +{m}" for m in n if m not in o]
                lines += [f"~ {key} -{m}" for m in o if m not in n]
                lines += [f"~ {key} {m} score {o[m]:g} -> {n[m]:g}" for m in n if m in o and o[m] != n[m]]
            else:
                lines.append(f"~ {key} ({kind})")
    return lines
