"""What the audit trail costs an operator verb: the verb as declared (recorded) against
the same function bare (`fn.__wrapped__`), side by side on one server, alternating the
two sides in one run, both as a Python call and as the operator types it (`%emq`:
`verbs.execute` with a notebook session, the magic's own path).

    python bench/audit_cost.py [--jobs 1000] [--repeat 3]   # last line: the most us a record adds

The single verbs (pause, resume, remove, data, reprocess of one job) each send one
call: the transition's audited twin, which runs the transition's own script and then
XADDs the entry with the outcome its reply says (`lua/includes/audited.lua`). So the
record adds no round trip: what it adds is the entry's values (built by the client and
sent as 13 more plain arguments) and one XADD inside the call.
The bulk verb: a reprocess of 500 dead jobs at budget 100 (five calls) writes TWO
entries, `started` before its first call and the closing one after its last, holding
the first 100 ids and a digest of all (`moves.reprocess_jobs` in
Python; `%emq reprocess bulk --all --yes`, `moves.reprocess_dead`, through the magic).

Each side runs in chunks of `CHUNK` calls, ABBA, so a burst of load on this shared
machine falls on both; a run's figure for a side is its median chunk, and the line
shows the median over the runs. The bare side of a `%emq` line swaps the module's
function for its `__wrapped__` while it runs: the magic's own work is on both sides.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Iterator
from statistics import median_high as median
from types import ModuleType, SimpleNamespace

from common import args, connect, fill, ratio_line, server

from emq_notebook import admin, audit, connector, grammar, jobs, moves, scripts, verbs
from emq_notebook.keyspace import audit_key, base, job_key, queue_key
from emq_notebook.magics import NotebookSession

CHUNK = 50
# how a single verb is called: in Python, as the magic runs its line, as IPython runs the magic
SURFACES = ("python", "%emq", "IPython")
# the bulk verb is measured as a Python call and as the magic runs it
BULK_SURFACES = ("python", "%emq")
BULK = 500
BULK_BUDGET = 100
# the single verbs: name -> (module, function name, how many jobs a call consumes)
SINGLE = {
    "pause": (admin, "pause"),
    "resume": (admin, "resume"),
    "remove one job": (jobs, "remove_job"),
    "data": (jobs, "update_data"),
    "reprocess one job": (jobs, "reprocess_job"),
}
DATA = '{"to": "user@example.com"}'


@contextlib.contextmanager
def bare(module: ModuleType, name: str) -> Iterator[None]:
    """Inside the block, `module.name` is the function the recorder wraps."""
    recorded = getattr(module, name)
    setattr(module, name, recorded.__wrapped__)
    try:
        yield
    finally:
        setattr(module, name, recorded)


def timed(calls: Callable[[int], None], n: int) -> float:
    t = time.perf_counter()
    calls(n)
    return (time.perf_counter() - t) / n


def alternate(
    with_record: Callable[[int], None], without: Callable[[int], None], n: int
) -> tuple[float, float]:
    """`n` calls a side in chunks of `CHUNK`, ABBA; the median seconds a call of each side."""
    sides: list[list[float]] = [[], []]
    for i in range(max(1, n // CHUNK) * 2):
        side = (0, 1, 1, 0)[i % 4]
        sides[side].append(timed((with_record, without)[side], CHUNK))
    return median(sides[0]), median(sides[1])


class Bench:
    """One server, one connection, the notebook session on it, the queues filled."""

    def __init__(self, conn, n: int):
        self.conn, self.n = conn, n
        self.session = NotebookSession()
        self.session.out = lambda text: None
        self.session.conn = conn
        self.ids: dict[str, list[str]] = {}
        from IPython.testing.globalipapp import start_ipython

        self.shell = start_ipython()
        self.shell.run_line_magic("load_ext", "emq_notebook")

    def fill(self) -> None:
        """`ops` with a pending job a call of remove (both sides, every surface, chunks
        rounded up) and one job data rewrites; `dead` with a dead job a call of reprocess."""
        self.conn.client.flushall()
        need = 2 * len(SURFACES) * (self.n + 2 * CHUNK)
        fill(self.conn, "ops", need)
        self.ids["ops"] = self.conn.client.zrange(queue_key("ops", "pending"), 0, -1)
        fill(self.conn, "dead", need, dead=need)
        self.ids["dead"] = self.conn.client.zrange(queue_key("dead", "dead"), 0, -1)

    def python(self, name: str) -> Callable[[int], None]:
        module, function = SINGLE[name]
        conn, ids = self.conn, self.ids

        def run(n: int) -> None:
            fn = getattr(module, function)
            for _ in range(n):
                if name in ("pause", "resume"):
                    fn(conn, "ops")
                elif name == "remove one job":
                    fn(conn, "ops", ids["ops"].pop())
                elif name == "data":
                    fn(conn, "ops", ids["ops"][0], DATA)
                else:
                    fn(conn, "dead", ids["dead"].pop())

        return run

    def line(self, name: str) -> str:
        """The `%emq` line of one call of verb `name` (a job used once, where it takes one)."""
        ids = self.ids
        if name in ("pause", "resume"):
            return f"{name} ops"
        if name == "remove one job":
            return f"remove ops {ids['ops'].pop()}"
        if name == "data":
            return f"data ops {ids['ops'][0]} '{DATA}'"
        return f"reprocess dead {ids['dead'].pop()}"

    def magic(self, name: str) -> Callable[[int], None]:
        """The line as the magic runs it, its IPython dispatch aside (`verbs.execute`)."""

        def run(n: int) -> None:
            for _ in range(n):
                verbs.execute(self.session, grammar.parse(self.line(name)))

        return run

    def ipython(self, name: str) -> Callable[[int], None]:
        """The line typed in a notebook: IPython's `run_line_magic("emq", ...)` on a
        shell with the extension loaded, its printed answer captured."""
        from emq_notebook import magics

        magics.SESSION.conn = self.conn

        def run(n: int) -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                for _ in range(n):
                    self.shell.run_line_magic("emq", self.line(name))

        return run

    def side(self, name: str, surface: str) -> tuple[float, float]:
        make = {"python": self.python, "%emq": self.magic, "IPython": self.ipython}[surface]
        module, function = SINGLE[name]
        with_record = make(name)

        def without(n: int) -> None:
            with bare(module, function):
                make(name)(n)

        return alternate(with_record, without, self.n)

    def bulk(self, surface: str, recorded: bool) -> tuple[float, int]:
        """One bulk reprocess of `BULK` dead jobs; (seconds, entries written)."""
        conn = self.conn
        conn.client.delete(audit_key("bulk"))
        for key in conn.scan("emq:{bulk}:*"):
            conn.client.delete(key)
        fill(conn, "bulk", BULK, dead=BULK)
        ids = conn.client.zrange(queue_key("bulk", "dead"), 0, -1)
        module, function = (moves, "reprocess_jobs") if surface == "python" else (moves, "reprocess_dead")
        with contextlib.nullcontext() if recorded else bare(module, function):
            t = time.perf_counter()
            if surface == "python":
                words = moves.reprocess_jobs(conn, "bulk", ids, budget=BULK_BUDGET)
                assert sum(w == "reprocessed" for w in words.values()) == BULK
            else:
                line = f"reprocess bulk --all --yes --budget {BULK_BUDGET}"
                verbs.execute(self.session, grammar.parse(line))
            took = time.perf_counter() - t
        assert conn.client.zcard(queue_key("bulk", "pending")) == BULK
        return took, conn.client.xlen(audit_key("bulk"))


def floor(conn, n: int) -> tuple[float, float]:
    """pause with no toolkit code on either side: redis-py's EVALSHA of the audited twin
    (its entry built once, before) against EVALSHA of the script. What the server and
    the wire alone add for the record; the rest of a verb's ratio is the client's work."""
    meta, root = queue_key("ops", "meta"), base("ops")
    twin, bare_script = conn.script(scripts.AUDITED + "pause"), conn.script("pause")
    record = audit.Record(conn, "pause", "ops")
    keys, twin_args = [meta, audit_key("ops")], [root, *record.values(False)]

    def with_record(k: int) -> None:
        for _ in range(k):
            twin(keys=keys, args=twin_args)

    def without(k: int) -> None:
        for _ in range(k):
            bare_script(keys=[meta], args=[root])

    return alternate(with_record, without, n)


def where(conn, n: int, verb: str = "pause") -> dict[str, float]:
    """Where a recorded call's time goes, for `pause` (a queue verb) or `data` (a
    per-job verb, the costliest record): five ways of making the call, alternated in one
    loop (chunks of `CHUNK`, the order reversed each round), the median seconds a call
    of each. Each step adds one part: the twin on the wire (no toolkit code), the
    toolkit's verb bare, the verb sending its transition as the twin with the entry made
    once, the verb recorded (the recorder's own Python: the entry's fields, each call)."""
    stream = audit_key("ops")
    if verb == "pause":
        name, keys, argv = "pause", [queue_key("ops", "meta")], [base("ops")]
        recorded, call, record = admin.pause, (conn, "ops"), audit.Record(conn, "pause", "ops")
    else:
        job = conn.client.zrange(queue_key("ops", "pending"), 0, 0)[0]
        name, keys, argv = "update_data", [job_key("ops", job), base("ops")], [DATA, job]
        recorded, call = jobs.update_data, (conn, "ops", job, DATA)
        record = audit.Record(conn, "data", "ops", args={"payload": DATA}, job=job)
    twin, bare_script = conn.script(scripts.AUDITED + name), conn.script(name)
    entry = record.values(name != "pause")
    bare = recorded.__wrapped__

    def as_twin() -> None:
        made = SimpleNamespace(
            conn=conn, key=stream, sent=False, entry=None, failure=None, values=lambda gone: entry
        )
        connector.carrying(made, bare, *call)

    ways: dict[str, Callable[[], object]] = {
        "EVALSHA of the script (redis-py)": lambda: bare_script(keys=keys, args=argv),
        "EVALSHA of the twin (redis-py)": lambda: twin(keys=[*keys, stream], args=[*argv, *entry]),
        "the verb, bare": lambda: bare(*call),
        "the verb, its transition as the twin": as_twin,
        "the verb, recorded": lambda: recorded(*call),
    }
    took: dict[str, list[float]] = {way: [] for way in ways}
    for i in range(max(1, n // CHUNK)):
        for way in list(ways) if i % 2 == 0 else list(ways)[::-1]:
            run = ways[way]
            t = time.perf_counter()
            for _ in range(CHUNK):
                run()
            took[way].append((time.perf_counter() - t) / CHUNK)
    return {way: median(times) for way, times in took.items()}


def main() -> None:
    a = args(1000, __doc__, repeat=3)
    surfaces = SURFACES
    with server(shared_cpu=a.shared_cpu) as srv:
        conn = connect(srv)
        connector.name_client(conn)
        b = Bench(conn, a.jobs)
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {
            (name, s): [] for name in SINGLE for s in surfaces
        }
        bulk_runs: dict[str, list[tuple[float, float]]] = {s: [] for s in BULK_SURFACES}
        floors: list[tuple[float, float]] = []
        steps: dict[str, list[dict[str, float]]] = {"pause": [], "data": []}
        for _ in range(a.repeat):
            floors.append(floor(conn, a.jobs))
            b.fill()
            for verb, seen in steps.items():
                seen.append(where(conn, a.jobs, verb))
            for name in SINGLE:
                for s in surfaces:
                    runs[name, s].append(b.side(name, s))
            assert conn.client.xlen(audit_key("ops")) > 0 and conn.client.xlen(audit_key("dead")) > 0
            for s in BULK_SURFACES:
                (w, entries), (bare_s, none) = b.bulk(s, True), b.bulk(s, False)
                assert (entries, none) == (2, 0), (entries, none)  # started, then the closing entry
                bulk_runs[s].append((w, bare_s))
    print(
        f"calls: {a.jobs:,} a side per verb and surface, in chunks of {CHUNK} alternating ABBA, "
        f"{a.repeat} runs; us a call with the record / bare (median chunk, median run), ratio"
    )
    print(f"{'verb':<20}" + "".join(f"{s:>28}" for s in surfaces))
    worst = most_added = 0.0
    for name in SINGLE:
        cells = []
        for s in surfaces:
            w, b_ = median(r[0] for r in runs[name, s]), median(r[1] for r in runs[name, s])
            ratio = median(r[0] / r[1] for r in runs[name, s])
            worst = max(worst, ratio)
            most_added = max(most_added, median(r[0] - r[1] for r in runs[name, s]) * 1e6)
            cells.append(f"{w * 1e6:6.0f} / {b_ * 1e6:4.0f} us  {ratio:5.2f}")
        print(f"{name:<20}" + "".join(f"{c:>28}" for c in cells))
    cells = []
    for s in BULK_SURFACES:
        w, b_ = median(r[0] for r in bulk_runs[s]), median(r[1] for r in bulk_runs[s])
        cells.append(f"{w * 1e3:5.1f} / {b_ * 1e3:4.1f} ms  {median(r[0] / r[1] for r in bulk_runs[s]):5.2f}")
    print(f"{f'bulk reprocess {BULK}':<20}" + "".join(f"{c:>28}" for c in cells))
    print(f"(the bulk verb: {BULK // BULK_BUDGET} calls, one entry)")
    w, b_ = median(r[0] for r in floors), median(r[1] for r in floors)
    print(
        f"floor, pause with no toolkit code (EVALSHA of its twin / of the script): "
        f"{w * 1e6:.0f} / {b_ * 1e6:.0f} us, {median(r[0] / r[1] for r in floors):.2f}"
    )
    for verb, seen in steps.items():
        print(f"where a recorded {verb}'s time goes (us a call, the five alternated in a loop, median run):")
        before = None
        for way in seen[0]:
            us = median(step[way] for step in seen) * 1e6
            added = "" if before is None else f"  ({us - before:+.0f})"
            print(f"  {way:<40}{us:6.0f}{added}")
            before = us
    print(f"with/without seconds per single verb (worst): {worst:.2f}")
    print(ratio_line("us added per single verb (worst)", most_added, "<= 60, SPEC 12"))


if __name__ == "__main__":
    main()
