"""What one tick call holds the server, whatever another node wrote in the registry
(issue 27): on a private Valkey, each case's due set is written straight into the
registry, then `@repeat_tick` is called `--ticks` times and SLOWLOG (every command logged)
says its longest call. Run it with this tree and with another on PYTHONPATH to compare
the scripts side by side.

    PYTHONPATH=. python bench/repeat_tick.py [--scale 1.0] [--ticks 3]
    # per case: the longest tick call (ms), the jobs made and the due names left;
    # then 1,000 bad due definitions of every kind ahead of 10 good ones: the tick calls
    # (`repeat.tick`, max_jobs 10) until each good one made its job (none after 50: the
    # walk from the head), the `bad_row` events of the first call and of them all;
    # last line: the worst call `repeat.tick` can make, against 20 ms
"""

from __future__ import annotations

import argparse
import json
import time

import redis
from common import server

import emq_notebook as emq
from emq_notebook import repeat
from emq_notebook.keyspace import base, new_id

MiB = 1 << 20
GOOD = json.dumps({"every": 60_000, "payload": "{}"})
# a tree whose tick walks on from a place it is sent (ARGV[1]) and answers the next
TAKES_PLACE = hasattr(repeat, "_PLACES")
# the bad definitions another node may write, every kind a tick skips
BAD = [
    "nope",
    '{"every": 0, "payload": "{}"}',
    '{"every": 1000, "payload": 7}',
    "[1, 2]",
    '{"every": 1000, "payload": "{}", "max_attempts": "three"}',
]
OVER = '{"every": 1000, "payload": "' + "p" * MiB + '"}'


def small_values(n: int) -> str:
    """A definition of about `n` bytes, most of them small JSON values (`{},{},...`)."""
    return '{"every": 60000, "payload": "{}", "x": [' + ",".join(["{}"] * (n // 3 - 15)) + "]}"


def json_text(n: int) -> str:
    """A definition of at most `n` bytes whose payload is JSON text (a quote escaped every
    few bytes), as register writes it."""
    text, m = json.dumps({f"k{i}": [i, "v"] for i in range(n // 10)}), n
    while len(d := json.dumps({"every": 60_000, "payload": text[:m]})) > n:
        m -= len(d) - n
    return d


def fill(r: redis.Redis, q: str, n: int, name, definition) -> None:
    p, b = r.pipeline(transaction=False), base(q)
    for i in range(n):
        d = definition(i)
        if d is not None:
            p.hset(b + "repeat:defs", name(i), d)
        p.zadd(b + "repeat", {name(i): 0})
        if i % 2000 == 1999:
            p.execute()
    p.execute()


def longest_call(r: redis.Redis) -> float:
    """The longest script call (ms) SLOWLOG holds since its reset."""
    log = [e for e in r.slowlog_get(100_000) if e["command"].startswith((b"EVAL", b"FCALL"))]
    return max((e["duration"] for e in log), default=0) / 1000


def worst_tick(r: redis.Redis, conn: emq.Connection, q: str, jobs: int, ticks: int) -> tuple[float, int]:
    r.slowlog_reset()
    made, place = 0, 0
    for _ in range(ticks):
        ids = [new_id() for _ in range(jobs)]
        if TAKES_PLACE:  # the script itself, for the jobs a call past MAX_TICK_JOBS
            place, *got = conn.run("repeat_tick", [base(q)], [place, *ids], verb="tick", queue=q)
        else:
            got = conn.run("repeat_tick", [base(q)], ids, verb="tick", queue=q)
        made += len(got)
    return longest_call(r), made


def good_behind_bad(r: redis.Redis, conn: emq.Connection, q: str, bad: int, good: int) -> tuple[str, float]:
    """`bad` bad definitions of every kind (4 of them over DEF_BYTES) due ahead of `good`
    good ones: the `repeat.tick` calls until each good one made its job (at most 50)."""
    fill(r, q, bad, lambda i: f"bad{i:05d}", lambda i: OVER if i < 4 else BAD[i % len(BAD)])
    b = base(q)
    r.zadd(b + "repeat", {f"good{i}": 10 + i for i in range(good)})
    r.hset(b + "repeat:defs", mapping={f"good{i}": GOOD for i in range(good)})
    ps = r.pubsub()
    ps.subscribe(b + "events")
    ps.get_message(timeout=1)
    r.slowlog_reset()
    calls, made, events = 0, 0, []
    while made < good and calls < 50:
        made += len(repeat.tick(conn, q, max_jobs=10))
        calls += 1
        events.append(0)
        while (m := ps.get_message(timeout=0.2)) is not None:
            events[-1] += m["type"] == "message" and json.loads(m["data"])["event"] == "bad_row"
    ps.close()
    said = f"{calls} tick calls" if made == good else f"{made} of {good} made after {calls} calls"
    r.delete(b + "repeat", b + "repeat:defs", b + "repeat:reported")
    ms = longest_call(r)
    return (
        f"{bad:>7,} bad due definitions ahead of {good} good ones: {said}, longest {ms:.2f} ms; "
        f"bad_row events {events[0]} in the first call, {sum(events)} in all"
    ), ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0, help="the due sets' sizes (1.0: 100,000 names)")
    p.add_argument("--ticks", type=int, default=3)
    a = p.parse_args()
    n = lambda k: max(1, round(k * a.scale))  # noqa: E731
    cases = [
        ("not-JSON definitions", n(20_000), lambda i: f"n{i:06d}", lambda i: "nope", 10),
        ("not-JSON definitions", n(100_000), lambda i: f"N{i:06d}", lambda i: "nope", 10),
        ("names with no definition", n(100_000), lambda i: f"g{i:06d}", lambda i: None, 10),
        (
            "1 MB names not UTF-8, definition 'x'",
            30,
            lambda i: b"\xff" * MiB + b"%d" % i,
            lambda i: "x",
            10,
        ),
        (
            "1 MB names not UTF-8, definitions of 1 MiB + 1",
            20,
            lambda i: b"\xfe" * MiB + str(i).encode(),
            lambda i: "y" * (MiB + 1),
            10,
        ),
        ("definitions of 1 KB not JSON", n(5_000), lambda i: f"k{i:06d}", lambda i: "[" + "x" * 1000, 10),
        # JSON of small values: a whole decode builds a Lua value every 3 bytes
        (
            "definitions of 1 KB of small values",
            n(5_000),
            lambda i: f"s{i:06d}",
            lambda i: small_values(1000),
            10,
        ),
        (
            "definitions of 1 MiB - 100 of small values",
            3,
            lambda i: f"S{i}",
            lambda i: small_values(MiB - 100),
            10,
        ),
        (
            "definitions of 1 MiB - 100, payload JSON text",
            3,
            lambda i: f"J{i}",
            lambda i: json_text(MiB - 100),
            10,
        ),
    ] + [
        (
            f"small good definitions, {jobs:,} jobs a call",
            jobs,
            (lambda j: lambda i: f"v{j}_{i:05d}")(jobs),
            lambda i: GOOD,
            jobs,
        )
        for jobs in (getattr(repeat, "MAX_TICK_JOBS", 250), 500, 1000)
    ]
    with server() as srv:
        r = redis.Redis(port=srv.port, socket_timeout=120)
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 100_000)
        conn = emq.connect(f"redis://127.0.0.1:{srv.port}")
        print(f"TICK_NAMES {getattr(repeat, 'TICK_NAMES', '-')}, ticks a case {a.ticks}")
        # the calls `repeat.tick` can make (the cases past MAX_TICK_JOBS are for scale only)
        most, worst = getattr(repeat, "MAX_TICK_JOBS", 10_000), 0.0
        for k, (what, count, name, definition, jobs) in enumerate(cases):
            q = f"t{k}"
            fill(r, q, count, name, definition)
            time.sleep(0.01)
            ms, made = worst_tick(r, conn, q, jobs, a.ticks)
            due = r.zcount(base(q) + "repeat", "-inf", int(time.time() * 1000))
            print(f"{count:>7,} {what}: longest tick {ms:7.2f} ms, {made:,} jobs made, {due:,} due left")
            r.delete(base(q) + "repeat", base(q) + "repeat:defs", base(q) + "repeat:reported")
            if jobs <= most:
                worst = max(worst, ms)
        line, ms = good_behind_bad(r, conn, "behind", 1_000, 10)
        print(line)
        worst = max(worst, ms)
        print(f"worst tick call: {worst:.2f} ms (target 20 ms): {worst / 20:.2f}")


if __name__ == "__main__":
    main()
