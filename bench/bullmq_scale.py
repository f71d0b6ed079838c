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
Prints one JSON line: {"seconds": ..., "counts": {...}}.
"""

import asyncio
import json
import sys
import time

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


async def fail_all(url: str, expected: int) -> None:
    kinds = iter(range(10**9))

    async def process(job, token):
        k = next(kinds) % KINDS
        raise RuntimeError(f"kind {chr(97 + k // 26)}{chr(97 + k % 26)} failed")

    worker = Worker(NAME, process, {"connection": url, "concurrency": 50, "autorun": False})
    queue = Queue(NAME, {"connection": url})
    task = asyncio.ensure_future(worker.run())
    while (await queue.getJobCounts("failed"))["failed"] < expected:
        await asyncio.sleep(0.5)
    await worker.close()
    await task
    await queue.close()


async def main(url: str, phase: str, n: int, payload: str) -> None:
    parts, data = shape(n), json.loads(payload)
    queue = Queue(NAME, {"connection": url})
    t = time.perf_counter()
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
    seconds = time.perf_counter() - t
    counts = await queue.getJobCounts("waiting", "delayed", "failed", "active")
    await queue.close()
    print(json.dumps({"seconds": seconds, "counts": counts}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
