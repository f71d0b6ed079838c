"""Ours against a peer: the same N-job listing (every job with its data) and the
same obliterate, with the PyPI `bullmq` package, on the same Valkey, side by
side. bullmq runs in its own venv (bench/.peers-venv, made and filled by this
script when absent) so its pinned dependencies never touch ours.

    python bench/peers.py [--jobs 100000]
    # last line: ours/theirs for the listing and for the obliterate (< 1 is faster)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import venv
from pathlib import Path

from common import args, connect, fill, payload, server

from emq_notebook import admin, frames

Q = "bench"
BULLMQ = "bullmq==3.4.4"
# the same C reply parser ours has, so the comparison is of the queues, not the parsers
PEER_PACKAGES = [BULLMQ, "hiredis"]
HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers-venv"


def peers_python() -> Path:
    py = PEERS / "bin" / "python"
    if (
        py.exists()
        and subprocess.run([py, "-c", "import bullmq, hiredis"], capture_output=True).returncode == 0
    ):
        return py
    print(f"installing {' '.join(PEER_PACKAGES)} into {PEERS} ...", flush=True)
    venv.create(PEERS, with_pip=True, clear=True)
    subprocess.run([py, "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    return py


def bullmq(py: Path, script: str, srv, *argv: str, timeout: float, what: str) -> dict:
    """bench/SCRIPT in the peers' venv on `srv` (its URL, then ARGV, then a payload): the
    JSON object of its last printed line. A peer that fails ends the bench with its stderr."""
    run = subprocess.run(
        [py, str(HERE / script), f"redis://127.0.0.1:{srv.port}/0", *argv, payload(0)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if run.returncode != 0:
        sys.exit(f"{what} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def ours(conn, n: int) -> tuple[float, float]:
    conn.client.flushall()
    fill(conn, Q, n)
    t = time.perf_counter()
    listed = frames.snapshot(conn, Q)
    listing = time.perf_counter() - t
    assert len(listed) == n
    t = time.perf_counter()
    admin.pause(conn, Q)
    admin.obliterate_all(conn, Q, force=True)
    return listing, time.perf_counter() - t


def theirs(py: Path, srv, n: int) -> tuple[float, float]:
    srv_client = connect(srv).client
    srv_client.flushall()
    got = bullmq(py, "bullmq_side.py", srv, str(n), timeout=1800, what="bullmq side")
    assert srv_client.dbsize() == 0, "bullmq left keys behind"
    return got["listing"], got["obliterate"]


def main() -> None:
    a = args(100_000, __doc__)
    py = peers_python()
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        mine, peer = [], []
        for _ in range(a.repeat):
            mine.append(ours(conn, a.jobs))
            peer.append(theirs(py, srv, a.jobs))
    (l_ours, o_ours), (l_peer, o_peer) = [
        tuple(min(x) for x in zip(*side, strict=True)) for side in (mine, peer)
    ]
    print(f"jobs: {a.jobs:,} waiting, 100-byte payloads; {' + '.join(PEER_PACKAGES)} in {PEERS.name}")
    print(f"listing with data: ours {l_ours:.3f}s (frames.snapshot)   bullmq {l_peer:.3f}s (getJobs)")
    print(f"obliterate:        ours {o_ours:.3f}s (obliterate_all)    bullmq {o_peer:.3f}s (obliterate)")
    print(
        f"ours/bullmq listing: {l_ours / l_peer:.2f}, obliterate: {o_ours / o_peer:.2f} (target < 1 on both)"
    )


if __name__ == "__main__":
    main()
