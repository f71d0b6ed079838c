"""BullMQ's side of bench/scale.py, run in the peers' own venv (never imported by
ours): one phase per run, so the caller can watch each with its own pinger.

    python bullmq_scale.py URL PHASE N PAYLOAD

Phases, on the queue "scale" shaped as ours is (BullMQ's open-source queue has no
groups, so the grouped 10% are plain waiting jobs):
  add-dead   add 30% of N with attempts 1, addBulk in chunks of 1,000 (timed)
  fail       a Worker fails every one of them, 50 error kinds (untimed set-up)
  add-rest   add 40% + 10% waiting and 20% delayed an hour, chunks of 1,000 (timed)
  drain      Queue.drain(): the waiting jobs (timed)
  retry      Queue.retryJobs(): failed back to waiting (timed)
  obliterate Queue.obliterate(): the rest (timed)
Prints one JSON line: {"seconds": ..., "counts": {...}, "note": ...}.

bullmq's own client (redis-py's default socket timeout, 5 s) gives up on a script
that runs longer, such as its unbounded drain of 500,000 jobs, and its retry then
meets BUSY while the script still runs on. So the queue here gets a client without
socket timeout, as the floors do; should a call fail all the same, the phase waits
until the server answers again, counts that time, and says so in "note".
"""

import asyncio
import json
import sys
import time
import urllib.parse

import redis
import redis.asyncio
from bullmq import Queue, Worker

NAME = "scale"
CHUNK = 1000
KINDS = 50


def shape(n: int) -> dict:
    dead, delayed = n * 3 // 10, n * 2 // 10
    grouped = n // 10
    return {"dead": dead, "delayed": delayed, "waiting": n - dead - delayed - grouped, "grouped": grouped}


async def add(queue: Queue, count: int, data: dict, opts: dict) -> None:
    for start in range(0, count, CHUNK):
        size = min(CHUNK, count - start)
        await queue.addBulk([{"name": "mail", "data": data, "opts": dict(opts)} for _ in range(size)])


def connection(url: str) -> dict:
    """bullmq's connection options for `url`, without a socket timeout."""
    parts = urllib.parse.urlparse(url)
    return {
        "host": parts.hostname,
        "port": parts.port,
        "db": int(parts.path.strip("/") or 0),
        "socket_timeout": None,
    }


async def fail_all(url: str, expected: int) -> None:
    kinds = iter(range(10**9))

    async def process(job, token):
        k = next(kinds) % KINDS
        raise RuntimeError(f"kind {chr(97 + k // 26)}{chr(97 + k % 26)} failed")

    worker = Worker(NAME, process, {"connection": connection(url), "concurrency": 50, "autorun": False})
    queue = Queue(NAME, {"connection": connection(url)})
    task = asyncio.ensure_future(worker.run())
    while (await queue.getJobCounts("failed"))["failed"] < expected:
        await asyncio.sleep(0.5)
    await worker.close()
    await task
    await queue.close()


async def served(url: str) -> None:
    """Return once the server answers a PING (a client with no socket timeout, BUSY retried)."""
    client = redis.asyncio.Redis.from_url(url, socket_timeout=None)
    while True:
        try:
            await client.ping()
            break
        except redis.ResponseError as exc:
            if not str(exc).startswith("BUSY"):
                raise
            await asyncio.sleep(0.01)
    await client.aclose()


async def main(url: str, phase: str, n: int, payload: str) -> None:
    parts, data = shape(n), json.loads(payload)
    queue = Queue(NAME, {"connection": connection(url)})
    t = time.perf_counter()
    note = None
    try:
        await run(queue, url, phase, parts, data)
    except (redis.TimeoutError, redis.ResponseError) as exc:
        note = f"bullmq's own client gave up ({type(exc).__name__}: {str(exc)[:80]}); the script ran on"
        await served(url)
    seconds = time.perf_counter() - t
    counts = await queue.getJobCounts("waiting", "delayed", "failed", "active")
    await queue.close()
    print(json.dumps({"seconds": seconds, "counts": counts, "note": note}))


async def run(queue: Queue, url: str, phase: str, parts: dict, data: dict) -> None:
    if phase == "add-dead":
        await add(queue, parts["dead"], data, {"attempts": 1})
    elif phase == "fail":
        await fail_all(url, parts["dead"])
    elif phase == "add-rest":
        await add(queue, parts["waiting"] + parts["grouped"], data, {})
        await add(queue, parts["delayed"], data, {"delay": 3_600_000})
    elif phase == "drain":
        await queue.drain()
    elif phase == "retry":
        await queue.retryJobs({"state": "failed"})
    elif phase == "obliterate":
        await queue.obliterate(force=True)
    else:
        raise SystemExit(f"unknown phase {phase}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
