"""BullMQ's side of bench/peers.py, run in the peers' own venv (never imported
by ours): fill N waiting jobs with addBulk (untimed), then time listing them with
their data (getJobs, in pages of 1,000 as a dashboard does: one getJobs over
100,000 jobs timed out in bullmq's own client here) and obliterating the queue.
Prints one JSON line."""

import asyncio
import json
import sys
import time

from bullmq import Queue

PAGE = 1000


async def main(url: str, n: int, payload: str) -> None:
    queue = Queue("peers", {"connection": url})
    data = json.loads(payload)
    for start in range(0, n, 1000):
        await queue.addBulk([{"name": "mail", "data": data} for _ in range(start, min(n, start + 1000))])
    t = time.perf_counter()
    listed = []
    for start in range(0, n, PAGE):
        listed += await queue.getJobs(["waiting"], start, start + PAGE - 1)
    listing = time.perf_counter() - t
    assert len(listed) == n, len(listed)
    t = time.perf_counter()
    await queue.obliterate(force=True)
    obliterate = time.perf_counter() - t
    await queue.close()
    print(json.dumps({"listing": listing, "obliterate": obliterate}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
