"""A queue's keyspace footprint, and what a transition changed in it.

Reads every key under `emq:{q}:` (SCAN, never KEYS), so the console can show
the keys and fields a verb wrote or deleted, and a runbook can show a footprint
of zero after an obliterate.
"""

from __future__ import annotations

from .connector import Connection
from .keyspace import base


def footprint(conn: Connection, q: str) -> dict[str, tuple[str, object]]:
    """{key: (type, value)} for every key of queue `q`."""
    keys = sorted(conn.scan(base(q) + "*"))
    pipe = conn.pipeline()
    for k in keys:
        pipe.type(k)
    kinds = pipe.execute()
    read = {"hash": lambda p, k: p.hgetall(k), "zset": lambda p, k: p.zrange(k, 0, -1, withscores=True),
            "list": lambda p, k: p.lrange(k, 0, -1), "set": lambda p, k: p.smembers(k),
            "string": lambda p, k: p.get(k)}
    pipe = conn.pipeline()
    for k, kind in zip(keys, kinds, strict=True):
        read.get(kind, lambda p, k: p.type(k))(pipe, k)
    values = pipe.execute()
    return {k: (kind, sorted(v) if kind == "set" else v)
            for k, kind, v in zip(keys, kinds, values, strict=True)}


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
