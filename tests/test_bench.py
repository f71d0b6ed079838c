"""The benchmarks cannot rot: each script in bench/ runs here on a small queue
and must finish and print its ratio line. No timing is asserted (the figures
are in bench/README.md; this machine is shared and noisy)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SMALL = {
    "snapshot.py": ("5000", "snapshot/floor: "),
    "destroy.py": ("5000", "drain/floor: "),
    "claim.py": ("2000", "function/script throughput: "),
    "peers.py": ("2000", "ours/bullmq listing: "),
    "scale.py": ("2000", "worst ratio to target: "),
    "find.py": ("5000", "find/(snapshot+filter): "),
    "latency_cost.py": ("1000", "with/without seconds per cycle: "),
    "watch.py": ("2000", "worst refresh of 1,000 queues: "),
    "audit_cost.py": ("200", "us added per single verb (worst): "),
    "harm.py": ("2000", "worst server block: "),
    "lanes_watch.py": ("2000", "worst call against 20 ms: "),
    "bounded_reads.py": ("2000", "longest call now/before (worst of the two reads): "),
    "claim_ghosts.py": ("5000", "worst call/20 ms: "),
    "hostile.py": ("200", "worst call against 20 ms: "),
    "transfer.py": ("2000", "worst server block: "),
}
# scripts whose size is said otherwise: their arguments for a small run, and their last line
OTHER = {
    "read_job_names.py": (["--repeat", "1"], "measured/listed x"),
    "repeat_tick.py": (["--scale", "0.01", "--ticks", "1"], "worst tick call: "),
    "big_heads.py": (
        ["--sizes", "1.5", "--places", "head", "--looks", "health", "--repeat", "1", "--queues", "5"],
        "worst call before/now: ",
    ),
    "hostile_claims.py": (["--scale", "0.01", "--repeat", "1"], "worst call against 20 ms: "),
    "monitor.py": (
        ["--queues", "20", "--repeat", "1", "--scrapes", "20", "--memory-queues", "3"],
        "worst scrape of 20 queues: ",
    ),
}


# shared code, and the peers' sides (run by peers.py and scale.py in their own venv)
NOT_SCRIPTS = ("common.py", "bullmq_side.py", "bullmq_scale.py")


def test_every_bench_script_is_covered():
    scripts = sorted(p.name for p in BENCH.glob("*.py") if p.name not in NOT_SCRIPTS)
    assert scripts == sorted([*SMALL, *OTHER, "soak.py"])


@pytest.mark.parametrize("script", sorted([*SMALL, *OTHER]))
def test_a_small_run_prints_its_ratio(script):
    argv, last = (
        (["--jobs", SMALL[script][0], "--repeat", "1"], SMALL[script][1])
        if script in SMALL
        else OTHER[script]
    )
    run = subprocess.run(
        [sys.executable, str(BENCH / script), *argv],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=BENCH,
        # this checkout's package, whatever the venv's editable install points at
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(BENCH), str(BENCH.parent), os.environ.get("PYTHONPATH")) if p
            ),
        },
    )
    assert run.returncode == 0, run.stderr[-3000:]
    final = run.stdout.strip().splitlines()[-1]
    assert final.startswith(last), final
    float(final[len(last) :].split()[0].rstrip(",:"))  # a number, not a placeholder


def test_a_short_soak_prints_its_figures():
    # three seconds on the fake (tests/test_soak.py runs the harness itself for 30 s on both)
    run = subprocess.run(
        [sys.executable, "-m", "bench.soak", "--minutes", "0.05", "--backend", "fake"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parent,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout.strip().splitlines()
    assert out[-1] == "lost: 0, invariant violations: 0", out
    assert any(line.startswith("jobs enqueued: ") for line in out)
