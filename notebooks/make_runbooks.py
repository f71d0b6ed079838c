"""Write the runbooks for a real incident (`notebooks/runbooks/`) from their cell lists.

    python notebooks/make_runbooks.py           # rewrite all five
    python notebooks/make_runbooks.py --check   # exit 1 when a stored runbook differs

Runbooks store NO outputs: they are run against a live server, by a person in Jupyter
or by papermill, and the executed copy is the incident record. Each one's first code
cell is tagged `parameters` (papermill's convention). With `APPLY = False` a runbook
only reads and shows the preview of every writing step; with `APPLY = True` each
writing step re-checks its precondition first; the last cell verifies the outcome.
A runbook never enqueues or seeds. `tests/test_runbooks_live.py` runs each one on a
staged incident on a real Valkey.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

OUT = Path(__file__).resolve().parent / "runbooks"


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str, *tags: str):
    cell = nbformat.v4.new_code_cell(text.strip())
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def how_to_run(name: str, queue: str) -> str:
    return f"""
**How to run it.** A server's password is never a parameter (this notebook, once run, is
the incident record and keeps every parameter): set the `EMQ_PASSWORD` environment
variable where Jupyter or papermill runs, and give `EMQ_URL` without it. In Jupyter: open
this notebook, set the parameters in the first code
cell (`EMQ_URL`, `QUEUE`, ...), *Run all*, and read the previews: with `APPLY = False`
the session is read-only and nothing is written. Then set `APPLY = True` and *Run all*
again: each step re-checks its precondition on the live server before it writes, and
stops the notebook when it no longer holds. The last cell fails the notebook when the
outcome is not reached. In automation:

    export EMQ_PASSWORD=...      # the server's password, when it has one
    papermill notebooks/runbooks/{name}.ipynb out.ipynb -p EMQ_URL redis://host:6379/0 -p QUEUE {queue} -p APPLY True

The executed notebook (`out.ipynb`) is the incident record: server, queue,
parameters, times and every step's preview and result."""


def opening(name: str, knobs: str) -> list:
    return [
        code(
            "%load_ext emq_notebook\nimport emq_notebook as emq\n"
            "from emq_notebook.runbook import Preview, need\n\n"
            f'rb = emq.runbook.start("{name}", EMQ_URL, QUEUE, APPLY, env=ENV, reason=REASON{knobs})\n'
            "conn = rb.conn"
        ),
        code("rb.status();"),
    ]


def glance(about: str) -> list:
    """The diagnosis opens with the queue's verdict and why (printed: the record keeps
    it) and its jobs per minute over the last hour (an image). Reads only."""
    return [md(f"## At a glance\n\n{about.strip()}"), code('rb.glance("throughput");')]


PARAMS = """
EMQ_URL = None      # the server, without its password (that is EMQ_PASSWORD); None: EMQ_URL, else embedded
QUEUE = "{queue}"
APPLY = False       # False: read only, show what each step would do; True: do it
ENV = None          # what this server is, e.g. "production": printed in the record
REASON = None       # why this run, e.g. "INC-4711 bounce storm": every audit entry it writes says it
"""

RUNBOOKS: dict[str, list] = {}

RUNBOOKS["10-triage-dead-letters"] = [
    md("""
# Runbook: triage the dead letters

A worker's bug (or a bad upstream) has filled the dead set. This runbook groups the
dead letters by error **signature** (numbers, ids and quoted parts folded), shows
samples, optionally **mends** the payloads of the chosen signature (`MEND_FROM` ->
`MEND_TO`, or edit the `mend` function), and **reprocesses** that signature at
`RATE` jobs a second after a `TRIAL` batch: when at least `STOP_IF_FAILING` of the
trial is dead again within `WATCH_S` seconds, it stops (`Halted`) and moves no more.
It acts on nothing until `SIGNATURE` names a group (a glob, e.g. `*bad recipient*`)."""),
    md(how_to_run("10-triage-dead-letters", "mailers")),
    code(
        PARAMS.format(queue="mailers")
        + """
SIGNATURE = None    # a glob over the signatures below, e.g. "*bad recipient*"; None: act on nothing
MEND_FROM = None    # mend the chosen payloads: this text ...
MEND_TO = None      # ... becomes this one (None: leave the payloads as they are)
RATE = 50           # reprocess at most this many jobs a second (None: as fast as it goes)
TRIAL = 5           # move this many first and watch them (0: no trial)
STOP_IF_FAILING = 0.5   # stop when this fraction of the trial is dead again
WATCH_S = 30        # watch the trial at most this long
LIMIT = 10_000      # read at most this many dead letters
""",
        "parameters",
    ),
    *opening(
        "10-triage-dead-letters",
        ", SIGNATURE=SIGNATURE, MEND_FROM=MEND_FROM, MEND_TO=MEND_TO, "
        "RATE=RATE, TRIAL=TRIAL, STOP_IF_FAILING=STOP_IF_FAILING, WATCH_S=WATCH_S",
    ),
    *glance("""
The queue's verdict (`failing`: at least half of the jobs finished in the last 5 minutes
failed) and its jobs per minute over the last hour. The red line is the failures: while
it stays up, the cause is still there, and what is reprocessed dies again."""),
    md("## The dead letters by signature"),
    code("""
groups = emq.triage.errors(conn, QUEUE, "dead")
groups
"""),
    code("""
dead = emq.triage.find(conn, QUEUE, state="dead", limit=LIMIT)
chosen = emq.runbook.choose(dead, SIGNATURE)
others = dead.drop(index=chosen.index)
print(f"SIGNATURE = {SIGNATURE!r}: {len(chosen):,} dead letters chosen, {len(others):,} left alone")
chosen[["attempts", "failures", "last_error", "payload"]].head(5)
"""),
    md("""
## Mend the payloads (optional)

`mend(payload)` answers the mended payload, or None to leave it. By default it replaces
`MEND_FROM` with `MEND_TO`; edit it for a fix a replacement cannot say. A JSON payload
must stay JSON: a mend that breaks it stops here, before anything is written."""),
    code("""
import json
from emq_notebook.checks import json_text

def mend(payload):
    if MEND_FROM is None or MEND_FROM not in payload:
        return None
    return payload.replace(MEND_FROM, MEND_TO or "")

mended = {}
for job_id, payload in chosen["payload"].items():
    new = mend(payload)
    if new is None or new == payload:
        continue
    try:
        json.loads(payload)
    except ValueError:
        pass
    else:
        json_text(new, f"the mended payload of {job_id}")
    mended[job_id] = new
first = next(iter(mended), None)
mend_preview = Preview(f"replace the payload of {len(mended):,} chosen dead letters", count=len(mended),
                       sample=list(mended)[:5],
                       facts={"first": f"{chosen.at[first, 'payload']} -> {mended[first]}"} if first else {})

def payloads_unchanged():
    rows = emq.frames.rows(conn, QUEUE, list(mended), fields=("payload",))
    moved = set(mended) - set(emq.runbook.in_dead(conn, QUEUE, mended))
    changed = [i for i, (p,) in zip(mended, rows) if p is not None and p != chosen.at[i, "payload"]]
    return need(not moved and not changed,
                f"{len(moved)} of the chosen jobs left the dead set and {len(changed)} payloads changed "
                "since the preview")

def apply_mend():
    for job_id, payload in mended.items():
        emq.jobs.update_data(conn, QUEUE, job_id, payload)
    return f"{len(mended):,} payloads mended"

rb.step("mend", mend_preview, apply_mend, precheck=payloads_unchanged);
"""),
    md("## Reprocess the chosen signature: a trial, then at a rate"),
    code("""
ids = list(chosen.index)
words = emq.runbook.reprocess_words(conn, QUEUE, ids, dry_run=True)
would = sum(w == "reprocessed" for w in words.values())
reprocess = Preview(f"reprocess {would:,} dead letters of {SIGNATURE!r}", count=would, sample=ids[:5],
                    facts={"trial": f"{min(TRIAL or 0, len(ids))} first, watched up to {WATCH_S} s; "
                                    f"stop when {STOP_IF_FAILING} of them die again",
                           "rate": f"{RATE} a second" if RATE else "as fast as it goes",
                           "left alone": f"{len(others):,} dead letters of other signatures"})

def still_dead():
    missing = len(ids) - len(emq.runbook.in_dead(conn, QUEUE, ids))
    return need(missing == 0, f"{missing} of the {len(ids)} chosen jobs are no longer dead "
                              "(reprocessed or removed since the preview)")

def apply_reprocess():
    done = emq.runbook.reprocess_chosen(conn, QUEUE, ids, rate=RATE, trial=TRIAL,
                                        stop_if_failing=STOP_IF_FAILING, watch_s=WATCH_S, say=rb.say)
    return ", ".join(f"{sum(w == v for w in done.values())} {v}" for v in sorted(set(done.values())))

rb.step("reprocess", reprocess, apply_reprocess, precheck=still_dead);
"""),
    md("## Verify"),
    code("""
rb.verify({
    f"none of the {len(ids):,} chosen jobs is dead": lambda: not emq.runbook.in_dead(conn, QUEUE, ids),
    f"the {len(others):,} others are still dead, untouched":
        lambda: len(emq.runbook.in_dead(conn, QUEUE, others.index)) == len(others),
});
"""),
]

RUNBOOKS["11-runaway-producer"] = [
    md("""
# Runbook: a runaway producer

A producer looped and the backlog is far above normal. This runbook **pauses** the
queue (claims answer empty; the backlog stays), previews what a **drain** would delete
(the count, sample ids, and what survives: jobs in flight, the repeatables, the
schedule), drains in bounded calls of `BUDGET` jobs, and **resumes** once the backlog
is back under `BACKLOG_ABOVE` (stop the producer first). Under `BACKLOG_ABOVE` it does
nothing."""),
    md(how_to_run("11-runaway-producer", "newsletters")),
    code(
        PARAMS.format(queue="newsletters")
        + """
BACKLOG_ABOVE = 10_000  # a backlog above this is a runaway; at or under it, nothing to do
INCLUDE_SCHEDULE = False    # drain the scheduled (delayed) jobs too
RESUME = True           # resume after the drain
BUDGET = 1000           # jobs per bounded drain call
""",
        "parameters",
    ),
    *opening(
        "11-runaway-producer",
        ", BACKLOG_ABOVE=BACKLOG_ABOVE, INCLUDE_SCHEDULE=INCLUDE_SCHEDULE, RESUME=RESUME, BUDGET=BUDGET",
    ),
    code("""
backlog = emq.admin.backlog(conn, QUEUE, include_schedule=INCLUDE_SCHEDULE)
was_paused = emq.admin.is_paused(conn, QUEUE)
runaway = backlog > BACKLOG_ABOVE
kept_repeatables = emq.runbook.repeatables(conn, QUEUE)
print(f"backlog {backlog:,}: " + (f"above BACKLOG_ABOVE = {BACKLOG_ABOVE:,}, a runaway" if runaway
                                  else f"at or under BACKLOG_ABOVE = {BACKLOG_ABOVE:,}, nothing to do"))
"""),
    md("## 1. Pause"),
    code("""
pause = Preview(f"pause {QUEUE}: claims answer empty, the backlog stays" if not was_paused
                else f"{QUEUE} is paused already", needed=runaway and not was_paused)
rb.step("pause", pause, lambda: emq.admin.pause(conn, QUEUE) or f"paused {QUEUE}");
"""),
    md("## 2. Drain"),
    code("""
backlog = emq.admin.backlog(conn, QUEUE, include_schedule=INCLUDE_SCHEDULE)
_, sample = emq.runbook.members(conn, QUEUE, "pending")
in_flight, in_flight_ids = emq.runbook.members(conn, QUEUE, "active")
scheduled, _ = emq.runbook.members(conn, QUEUE, "schedule")
survives = {"survives: in flight": f"{in_flight:,} {in_flight_ids}",
            "survives: repeatables": ", ".join(kept_repeatables) or "none"}
if not INCLUDE_SCHEDULE:
    survives["survives: scheduled"] = f"{scheduled:,}"
drain = Preview(f"drain {backlog:,} jobs from {QUEUE} (pending and lane backlogs"
                f"{', and the schedule' if INCLUDE_SCHEDULE else ''}), in calls of {BUDGET:,}",
                count=backlog, sample=sample, facts=survives, needed=runaway)

def drain_now():
    n = emq.admin.drain(conn, QUEUE, include_schedule=INCLUDE_SCHEDULE, budget=BUDGET,
                        progress=rb.progress("drain", backlog))
    return f"drained {n:,} jobs"

rb.step("drain", drain, drain_now,
        precheck=lambda: need(emq.admin.is_paused(conn, QUEUE),
                              f"{QUEUE} is running: it was resumed after the pause"));
"""),
    md("## 3. Resume"),
    code("""
resume = Preview(f"resume {QUEUE}: workers claim again", needed=runaway and RESUME)

def backlog_settled():
    now = emq.admin.backlog(conn, QUEUE, include_schedule=INCLUDE_SCHEDULE)
    return need(now <= BACKLOG_ABOVE, f"the backlog is {now:,} again: the producer is still "
                                      "running; stop it, then run this runbook again")

rb.step("resume", resume, lambda: emq.admin.resume(conn, QUEUE) or f"resumed {QUEUE}",
        precheck=backlog_settled);
"""),
    md("## Verify"),
    code("""
expect_paused = (not RESUME) if runaway else was_paused
rb.verify({
    f"backlog at or under {BACKLOG_ABOVE:,}":
        lambda: emq.admin.backlog(conn, QUEUE, include_schedule=INCLUDE_SCHEDULE) <= BACKLOG_ABOVE,
    f"the repeatables kept: {', '.join(kept_repeatables) or 'none'}":
        lambda: emq.runbook.repeatables(conn, QUEUE) == kept_repeatables,
    f"{QUEUE} {'paused' if expect_paused else 'running'}":
        lambda: emq.admin.is_paused(conn, QUEUE) == expect_paused,
});
"""),
]

RUNBOOKS["12-stuck-queue"] = [
    md("""
# Runbook: nothing moves

Jobs wait and nothing completes. This runbook looks for each cause a queue can hold:
the queue **paused**, a **lane paused** over its backlog, **expired leases** (jobs in
flight past their lease: a worker died holding them), **lanes at their limit**, and
scheduled jobs **overdue** by more than `OVERDUE_S`. Each cause found has its fix,
previewed: expire the leases, promote the overdue jobs, resume the lanes, raise the
limits named in `LANE_LIMITS`, resume the queue. When none is found, look at the
workers."""),
    md(how_to_run("12-stuck-queue", "reports")),
    code(
        PARAMS.format(queue="reports")
        + """
OVERDUE_S = 60      # a scheduled job due longer ago than this is overdue
LANE_LIMITS = {}    # raise these lanes' limits, e.g. {"acme": 4}
BUDGET = 500        # jobs per bounded call (at most 500: each job moved is rewritten)
""",
        "parameters",
    ),
    *opening("12-stuck-queue", ", OVERDUE_S=OVERDUE_S, LANE_LIMITS=LANE_LIMITS, BUDGET=BUDGET"),
    *glance("""
The queue's verdict (`paused` by an operator; `stuck`: a backlog and no claim for 5
minutes) and its jobs per minute over the last hour: when the claims (dashed) stopped
is when the queue stopped moving."""),
    md("## Why nothing moves"),
    code("""
now = conn.server_ms()
paused = emq.admin.is_paused(conn, QUEUE)
backlog = emq.admin.backlog(conn, QUEUE)
expired, expired_ids = emq.runbook.expired_leases(conn, QUEUE, now)
late, late_ids = emq.runbook.overdue(conn, QUEUE, now - OVERDUE_S * 1000)
lanes = emq.runbook.lane_frame(conn, QUEUE)
waiting = lanes[lanes["pending"] > 0]
paused_lanes = waiting[waiting["paused"]]
full_lanes = waiting[~waiting["paused"] & (waiting["active"] >= waiting["limit"])]
causes = [
    ("queue paused", paused and backlog > 0, f"{backlog:,} jobs wait", "resume"),
    ("lanes paused", len(paused_lanes) > 0, ", ".join(paused_lanes.index), "resume the lanes"),
    ("expired leases", expired > 0, f"{expired:,} in flight past their lease", "expire_leases"),
    ("lanes at their limit", len(full_lanes) > 0,
     ", ".join(f"{g} {r.active}/{r.limit}" for g, r in full_lanes.iterrows()),
     "expire_leases frees slots held by dead workers; LANE_LIMITS raises a limit"),
    ("scheduled overdue", late > 0, f"{late:,} due more than {OVERDUE_S} s ago", "promote"),
]
import pandas as pd

found = pd.DataFrame(causes, columns=["cause", "found", "detail", "fix"]).set_index("cause")
if not found["found"].any():
    print("no cause found in the queue: if nothing completes, look at the workers")
found
"""),
    md("## The fixes, each previewed"),
    code("""
def expire_all():
    moved = 0
    while (n := emq.jobs.expire_leases(conn, QUEUE, budget=BUDGET)):
        moved += n
    return f"{moved:,} jobs back to pending (stalled counted)"

rb.step("expire leases",
        Preview(f"put {expired:,} jobs whose lease passed back to pending", count=expired,
                sample=expired_ids),
        expire_all,
        precheck=lambda: need(emq.runbook.expired_leases(conn, QUEUE)[0] > 0,
                              "no lease is expired any more: a worker put the jobs back already"));
"""),
    code("""
def promote_all():
    moved = 0
    while (n := emq.jobs.promote(conn, QUEUE, budget=BUDGET)):
        moved += n
    return f"{moved:,} due jobs made ready"

rb.step("promote overdue",
        Preview(f"make {late:,} overdue scheduled jobs ready", count=late, sample=late_ids),
        promote_all,
        precheck=lambda: need(emq.runbook.overdue(conn, QUEUE)[0] > 0,
                              "no scheduled job is due any more: they were promoted already"));
"""),
    code("""
groups = list(paused_lanes.index)

def lanes_still_paused():
    now_paused = [g for g in groups if (emq.lanes.lane(conn, QUEUE, g) or {}).get("paused")]
    return need(now_paused == groups,
                f"lanes resumed since the preview: {sorted(set(groups) - set(now_paused))}")

def resume_lanes():
    for g in groups:
        emq.lanes.resume_lane(conn, QUEUE, g)
    return f"resumed lanes {', '.join(groups)}"

rb.step("resume lanes",
        Preview(f"resume {len(groups)} paused lanes holding {int(paused_lanes['pending'].sum()):,} jobs",
                count=len(groups), sample=groups),
        resume_lanes, precheck=lanes_still_paused);
"""),
    code("""
raise_to = {g: n for g, n in LANE_LIMITS.items() if g in lanes.index and n != lanes.at[g, "limit"]}

def limits_as_previewed():
    now = emq.runbook.lane_frame(conn, QUEUE)
    moved = [g for g in raise_to if now.at[g, "limit"] != lanes.at[g, "limit"]]
    return need(not moved, f"lane limits changed since the preview: {moved}")

def set_limits():
    for g, n in raise_to.items():
        emq.lanes.set_limit(conn, QUEUE, g, n)
    return ", ".join(f"{g} limit {n}" for g, n in raise_to.items())

rb.step("lane limits",
        Preview("set lane limits: " + (", ".join(f"{g} {lanes.at[g, 'limit']} -> {n}"
                                                 for g, n in raise_to.items()) or "none asked (LANE_LIMITS)"),
                count=len(raise_to), sample=list(raise_to)),
        set_limits, precheck=limits_as_previewed);
"""),
    code("""
rb.step("resume",
        Preview(f"resume {QUEUE}: {backlog:,} waiting jobs are claimed again", needed=paused and backlog > 0),
        lambda: emq.admin.resume(conn, QUEUE) or f"resumed {QUEUE}",
        precheck=lambda: need(emq.admin.is_paused(conn, QUEUE), f"{QUEUE} was resumed since the preview"));
"""),
    md("## Verify"),
    code("""
def no_paused_lane_waits():
    now = emq.runbook.lane_frame(conn, QUEUE)
    return not ((now["pending"] > 0) & now["paused"]).any()

rb.verify({
    f"{QUEUE} running (or nothing waits)":
        lambda: not emq.admin.is_paused(conn, QUEUE) or emq.admin.backlog(conn, QUEUE) == 0,
    "no expired lease": lambda: emq.runbook.expired_leases(conn, QUEUE)[0] == 0,
    f"no scheduled job overdue by more than {OVERDUE_S} s":
        lambda: emq.runbook.overdue(conn, QUEUE, conn.server_ms() - OVERDUE_S * 1000)[0] == 0,
    "no paused lane holds a backlog": no_paused_lane_waits,
});
"""),
]

RUNBOOKS["13-retire-a-queue"] = [
    md("""
# Runbook: retire a queue

The queue is no longer used and goes away: **pause** it, preview its **footprint**
(keys by kind, jobs by state), then a bounded **obliterate** (`BUDGET` jobs a call, with
progress) and verify that no key is left under `emq:{QUEUE}:`. A queue still in use
(jobs in flight, or work done in the last `IDLE_MINUTES`) is left as it is unless
`FORCE = True`, which destroys the jobs in flight too."""),
    md(how_to_run("13-retire-a-queue", "legacy")),
    code(
        PARAMS.format(queue="legacy")
        + """
FORCE = False       # True: retire it even with jobs in flight or recent work
IDLE_MINUTES = 15   # no completion or failure for this long, else the queue is in use
BUDGET = 1000       # jobs per bounded obliterate call
""",
        "parameters",
    ),
    *opening("13-retire-a-queue", ", FORCE=FORCE, IDLE_MINUTES=IDLE_MINUTES, BUDGET=BUDGET, absent_ok=True"),
    md("## The footprint"),
    code("""
import collections
import pandas as pd

root = f"emq:{{{QUEUE}}}:"
keys = conn.scan(root + "*")

def kind(key):
    rest = key[len(root):]
    if rest.startswith("job:"):
        return "job " + (rest.rsplit(":", 1)[1] if rest.count(":") > 1 else "row")
    return "lane" if rest.startswith("g:") else rest.split(":", 1)[0]

by_kind = pd.Series(collections.Counter(map(kind, keys)), name="keys", dtype="int64").sort_index()
by_state = emq.frames.counts(conn, [QUEUE]) if keys else None
print(f"{len(keys):,} keys under {root}")
by_kind
"""),
    code("""
in_flight, in_flight_ids = emq.runbook.members(conn, QUEUE, "active")
recent = emq.frames.metrics(conn, QUEUE, since_ms=IDLE_MINUTES * 60_000).sum() if keys else None
worked = int(recent[["completed", "failed"]].sum()) if recent is not None else 0    # not the claims
in_use = [why for why, yes in ((f"{in_flight:,} jobs in flight", in_flight > 0),
                               (f"{worked:,} jobs finished in the last {IDLE_MINUTES} minutes", worked > 0))
          if yes]
retire = bool(keys) and (FORCE or not in_use)
jobs_total = emq.admin.job_count(conn, QUEUE) if keys else 0
if not keys:
    print(f"{QUEUE}: no key on this server, nothing to retire")
elif in_use and not FORCE:
    print(f"{QUEUE} is in use ({'; '.join(in_use)}): left as it is (FORCE = True retires it anyway)")
by_state
"""),
    md("## 1. Pause"),
    code("""
was_paused = emq.admin.is_paused(conn, QUEUE)
rb.step("pause", Preview(f"pause {QUEUE}" if not was_paused else f"{QUEUE} is paused already",
                         needed=retire and not was_paused),
        lambda: emq.admin.pause(conn, QUEUE) or f"paused {QUEUE}");
"""),
    md("## 2. Obliterate, bounded"),
    code("""
_, sample = emq.runbook.members(conn, QUEUE, "pending")
obliterate = Preview(f"obliterate {QUEUE}: {len(keys):,} keys, {jobs_total:,} jobs, in calls of {BUDGET:,}",
                     count=len(keys), sample=(in_flight_ids + sample)[:5], needed=retire,
                     facts={"keys by kind": dict(by_kind), "in flight, destroyed too": f"{in_flight:,}"}
                     if FORCE else {"keys by kind": dict(by_kind)})

def can_obliterate():
    if not emq.admin.is_paused(conn, QUEUE):
        return f"{QUEUE} is running: it was resumed after the pause"
    now_in_flight = emq.runbook.members(conn, QUEUE, "active")[0]
    return need(FORCE or now_in_flight == 0, f"{now_in_flight} jobs in flight now (FORCE = False)")

def obliterate_now():
    calls = emq.admin.obliterate_all(conn, QUEUE, force=FORCE, budget=BUDGET,
                                     progress=rb.progress("obliterate", jobs_total, left=True))
    return f"obliterated {QUEUE} in {calls} bounded calls"

rb.step("obliterate", obliterate, obliterate_now, precheck=can_obliterate);
"""),
    md("## Verify"),
    code("""
left = lambda: len(conn.scan(root + "*"))
rb.verify({f"no key left under {root}": lambda: left() == 0} if retire or not keys else
          {f"in use, so left in place ({left():,} keys)": lambda: left() > 0});
"""),
]

RUNBOOKS["14-lane-hotspot"] = [
    md("""
# Runbook: one lane starves the others

One group's jobs hold most of the workers while other lanes wait. This runbook shows
the lanes (limit, in flight, backlog), picks the hot lane (`HOT_LANE`, or the one
holding at least `HOT_SHARE` of the jobs in flight while other lanes wait), **limits**
it to `LIMIT` (or **pauses** it, `ACTION = "pause"`), and verifies within `WATCH_S`
seconds that the other lanes are served. With no lane starving the others it does
nothing."""),
    md(how_to_run("14-lane-hotspot", "tenants")),
    code(
        PARAMS.format(queue="tenants")
        + """
HOT_LANE = None     # the lane to act on; None: the one holding the most jobs in flight
HOT_SHARE = 0.5     # a lane holding at least this share of the in-flight jobs, others waiting, is hot
ACTION = "limit"    # "limit" (to LIMIT) or "pause"
LIMIT = 1           # the hot lane's new limit
WATCH_S = 30        # how long the verify waits for the other lanes to be served
""",
        "parameters",
    ),
    *opening(
        "14-lane-hotspot",
        ", HOT_LANE=HOT_LANE, HOT_SHARE=HOT_SHARE, ACTION=ACTION, LIMIT=LIMIT, WATCH_S=WATCH_S",
    ),
    md("## The lanes"),
    code("""
if ACTION not in ("limit", "pause"):
    raise emq.BadInput(f"ACTION is 'limit' or 'pause', not {ACTION!r}")
lanes = emq.runbook.lane_frame(conn, QUEUE)
lanes
"""),
    code("""
if HOT_LANE is not None and HOT_LANE not in lanes.index:
    raise emq.BadInput(f"HOT_LANE {HOT_LANE!r} is not a lane of {QUEUE}: {', '.join(lanes.index) or 'none'}")
hot = HOT_LANE if HOT_LANE is not None else (lanes["active"].idxmax() if len(lanes) else None)
starved = lanes[(lanes.index != hot) & (lanes["pending"] > 0) & ~lanes["paused"]] if hot else lanes.iloc[0:0]
share = float(lanes.at[hot, "active_share"]) if hot else 0.0
hotspot = hot is not None and len(starved) > 0 and (HOT_LANE is not None or
                                                    (share >= HOT_SHARE and lanes.at[hot, "active"] >= 2))
if hotspot:
    print(f"lane {hot} holds {lanes.at[hot, 'active']} of the jobs in flight ({share:.0%}) while "
          f"{len(starved)} lanes wait: {', '.join(f'{g} ({n:,})' for g, n in starved['pending'].items())}")
else:
    print("no lane starves the others: nothing to do")
"""),
    md("## Limit or pause the hot lane"),
    code("""
if ACTION == "limit":
    what = f"limit lane {hot} to {LIMIT} (now {lanes.at[hot, 'limit']})" if hot else "no lane"
else:
    what = f"pause lane {hot}" if hot else "no lane"
row = lanes.loc[hot] if hot else None
act = Preview(f"{what}: the others take its workers as its jobs in flight finish",
              count=len(starved), sample=list(starved.index), needed=hotspot,
              facts={"hot lane": f"{hot}: {row.pending:,} waiting, {row.active} in flight, limit {row.limit}"
                                 f"{', paused' if row.paused else ''}" if hot else "none",
                     "lanes waiting": ", ".join(f"{g} ({n:,} jobs)" for g, n in starved["pending"].items())})

def as_previewed():
    now = emq.lanes.lane(conn, QUEUE, hot)
    if now is None:
        return f"lane {hot} is gone"
    if now["paused"] != bool(lanes.at[hot, "paused"]) or now["limit"] != lanes.at[hot, "limit"]:
        return f"lane {hot} was changed since the preview: limit {now['limit']}, paused {now['paused']}"
    return None

def act_now():
    if ACTION == "limit":
        emq.lanes.set_limit(conn, QUEUE, hot, LIMIT)
        return f"lane {hot} limited to {LIMIT}"
    emq.lanes.pause_lane(conn, QUEUE, hot)
    return f"lane {hot} paused"

acted = rb.step(ACTION, act, act_now, precheck=as_previewed) is not None
"""),
    md("## Verify: the other lanes are served"),
    code("""
import time

def served():
    if not acted:           # nothing was changed: the lanes are as they were
        return not hotspot
    before = starved["pending"]
    deadline = time.monotonic() + WATCH_S
    while True:
        now = emq.runbook.lane_frame(conn, QUEUE)
        moved = [g for g in before.index if g not in now.index or now.at[g, "pending"] < before[g]
                 or now.at[g, "active"] > 0]
        if len(moved) == len(before) or time.monotonic() > deadline:
            print(f"served within the watch: {', '.join(moved) or 'none'} of {', '.join(before.index)}")
            return len(moved) == len(before)
        time.sleep(0.25)

def hot_as_set():
    if not acted:
        return True
    now = emq.lanes.lane(conn, QUEUE, hot) or {}
    return now.get("limit") == LIMIT if ACTION == "limit" else bool(now.get("paused"))

rb.verify({
    "every waiting lane is served" if acted else "no lane starves the others": served,
    f"lane {hot} {'at limit ' + str(LIMIT) if ACTION == 'limit' else 'paused'}" if acted
    else "no lane changed": hot_as_set,
});
"""),
]


def build(name: str, cells: list) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for n, cell in enumerate(nb.cells):
        cell.id = f"rb{name[:2]}-{n:02}"  # stable ids: quiet diffs
    return nb


def text(name: str) -> str:
    return nbformat.writes(build(name, RUNBOOKS[name])) + "\n"


if __name__ == "__main__":
    check = "--check" in sys.argv
    OUT.mkdir(exist_ok=True)
    stale = []
    for name in [a for a in sys.argv[1:] if not a.startswith("--")] or RUNBOOKS:
        path = OUT / f"{name}.ipynb"
        if check:
            if not path.is_file() or path.read_text() != text(name):
                stale.append(path.name)
            continue
        path.write_text(text(name))
        print("wrote", path)
    if stale:
        sys.exit(f"stale runbooks (run python notebooks/make_runbooks.py): {', '.join(stale)}")
