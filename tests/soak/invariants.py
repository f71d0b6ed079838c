"""The invariants a soak checks on an atomic snapshot of each queue, every few
seconds while it runs and at its end (`Checker` lists them)."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from typing import Any

from .roles import Q1, Q2

# One read-only script, so the snapshot is one instant of the queue: its four
# sets, its lanes (members and active count), its rows (id -> group), its dedup
# keys, its orphan :logs / :lock keys, the length of each :logs list and its
# paused field.
SNAPSHOT = r"""
local base = KEYS[1]
local out = {sets = {}, lanes = {}, rows = {}, orphans = {}, logs = {}}
for _, s in ipairs({'pending', 'active', 'schedule', 'dead'}) do
  out.sets[s] = redis.call('ZRANGE', base .. s, 0, -1)
end
for _, g in ipairs(redis.call('SMEMBERS', base .. 'groups')) do
  out.lanes[g] = {members = redis.call('ZRANGE', base .. 'g:' .. g .. ':pending', 0, -1),
    active = redis.call('HGET', base .. 'g:' .. g .. ':meta', 'active') or '0'}
end
local subs, cursor = {}, '0'
repeat
  local page = redis.call('SCAN', cursor, 'MATCH', base .. 'job:*', 'COUNT', 1000)
  cursor = page[1]
  for _, k in ipairs(page[2]) do
    local rest = string.sub(k, #base + 5)
    local tail = string.sub(rest, -5)
    if tail == ':logs' or tail == ':lock' then
      subs[#subs + 1] = rest
      if tail == ':logs' then out.logs[rest] = redis.call('LLEN', k) end
    else
      out.rows[rest] = redis.call('HGET', k, 'group') or ''
    end
  end
until cursor == '0'
for _, rest in ipairs(subs) do
  if not out.rows[string.sub(rest, 1, -6)] then out.orphans[#out.orphans + 1] = rest end
end
out.dedup = redis.call('HGETALL', base .. 'dedup')
out.paused = redis.call('HGET', base .. 'meta', 'paused') or ''
return cjson.encode(out)
"""


def _list(v: Any) -> list:
    """cjson encodes an empty Lua table as an object: read it as an empty list."""
    return v if isinstance(v, list) else []


def snapshot(client: Any, q: str) -> dict:
    from emq_notebook.keyspace import base

    raw = json.loads(client.eval(SNAPSHOT, 1, base(q)))
    lanes = raw["lanes"] if isinstance(raw["lanes"], dict) else {}
    rows = raw["rows"] if isinstance(raw["rows"], dict) else {}
    dedup = _list(raw["dedup"])
    place: dict[str, list[str]] = defaultdict(list)
    for s, ids in raw["sets"].items():
        for i in _list(ids):
            place[i].append(s)
    for g, lane in lanes.items():
        for i in _list(lane["members"]):
            place[i].append(f"lane {g}")
    logs = raw["logs"] if isinstance(raw["logs"], dict) else {}
    return {
        "place": dict(place),
        "rows": rows,
        "orphans": _list(raw["orphans"]),
        "paused": raw["paused"],
        "logs": {k[: -len(":logs")]: n for k, n in logs.items()},
        "lane_active": {g: int(lane["active"]) for g, lane in lanes.items()},
        "dedup": dict(zip(dedup[::2], dedup[1::2], strict=True)),
        "active": _list(raw["sets"].get("active")),
    }


class Checker:
    """Invariants on each snapshot: each row in at most one set or lane, no member
    without a row, each lane's active count equal to its jobs in flight, no orphan
    :logs / :lock, no dedup key pointing at a missing job, no job with more log
    lines than `keep` (every line comes from `add_log(keep=3)`), and no row in no
    set seen again in a snapshot `grace` seconds later. Remembers when each id was
    last seen alive (for the drain accounting)."""

    def __init__(self, client: Any, grace: float = 2.0, keep: int = 3):
        self.client, self.grace, self.keep = client, grace, keep
        self.violations: list[str] = []
        self._said: set[str] = set()
        self.homeless: dict[str, dict[str, float]] = {Q1: {}, Q2: {}}
        self.seen: dict[tuple[str, str], float] = {}
        self.checks = 0

    def flag(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.violations.append(text)

    def check(self, q: str, snap: dict, at: float) -> None:
        self.checks += 1
        place, rows = snap["place"], snap["rows"]
        for i, where in place.items():
            self.seen[(q, i)] = at
            if len(where) > 1:
                self.flag(f"{q} {i} is in {' and '.join(where)}")
        for i in set(place) - set(rows):
            self.flag(f"{q} {i} is in {place[i][0]} but has no row")
        in_flight: Counter = Counter(rows[i] for i in snap["active"] if rows.get(i))
        for g in set(in_flight) | set(snap["lane_active"]):
            if snap["lane_active"].get(g, 0) != in_flight.get(g, 0):
                self.flag(
                    f"{q} lane {g} counts {snap['lane_active'].get(g, 0)} in flight, "
                    f"holds {in_flight.get(g, 0)} (at {at:.1f})"
                )
        for key in snap["orphans"]:
            self.flag(f"{q} orphan key job:{key}")
        for i, n in snap.get("logs", {}).items():
            if n > self.keep:
                self.flag(f"{q} {i} keeps {n} log lines, more than add_log's keep={self.keep}")
        for key, holder in snap["dedup"].items():
            if holder not in rows:
                self.flag(f"{q} dedup key {key} points at {holder}, which has no row")
        homeless = {i: self.homeless[q].get(i, at) for i in set(rows) - set(place)}
        for i, first in homeless.items():
            if at - first >= self.grace:
                self.flag(f"{q} row {i} has been in no set since {first:.1f}")
        self.homeless[q] = homeless

    def round(self) -> dict[str, dict] | None:
        """Snapshot and check both queues; None when the server cannot be read now."""
        import redis

        try:
            snaps = {q: snapshot(self.client, q) for q in (Q1, Q2)}
        except (redis.RedisError, OSError):  # the server is down, or this connection was just killed
            return None
        at = time.time()
        for q, snap in snaps.items():
            self.check(q, snap, at)
        return snaps
