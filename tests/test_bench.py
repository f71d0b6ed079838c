"""The benchmarks cannot rot: each script in bench/ runs here on a small queue
and must finish and print its ratio line. No timing is asserted (the figures
are in bench/README.md; this machine is shared and noisy)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SMALL = {"snapshot.py": ("5000", "snapshot/floor: "), "destroy.py": ("5000", "drain/floor: "),
         "claim.py": ("2000", "function/script throughput: "),
         "peers.py": ("2000", "ours/bullmq listing: "),
         "latency_cost.py": ("1000", "with/without seconds per cycle: ")}


def test_every_bench_script_is_covered():
    assert sorted(p.name for p in BENCH.glob("*.py") if p.name not in ("common.py", "bullmq_side.py")) \
        == sorted(SMALL)


@pytest.mark.parametrize("script", sorted(SMALL))
def test_a_small_run_prints_its_ratio(script):
    jobs, last = SMALL[script]
    run = subprocess.run([sys.executable, str(BENCH / script), "--jobs", jobs, "--repeat", "1"],
                         capture_output=True, text=True, timeout=600, cwd=BENCH,
                         # this checkout's package, whatever the venv's editable install points at
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH), str(BENCH.parent)])})
    assert run.returncode == 0, run.stderr[-3000:]
    final = run.stdout.strip().splitlines()[-1]
    assert final.startswith(last), final
    float(final[len(last):].split()[0].rstrip(","))       # a number, not a placeholder
