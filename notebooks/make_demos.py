"""Write the demos (staged incidents, `notebooks/demos/`) from their cell lists and
execute them, storing outputs.

    python notebooks/make_demos.py          # rewrite and re-execute all seven

The stored outputs are what `pytest --nbval notebooks/demos/` compares against a
fresh run, so re-run this after changing a demo or a verb's printed line. (The
runbooks for a real incident, `notebooks/runbooks/`, are built by
`make_runbooks.py` and store no outputs.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
OUT = HERE / "demos"


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str):
    cell = nbformat.v4.new_code_cell(text.strip())
    if text.startswith("# raises on purpose"):
        # the tag tells nbclient to run on past it and nbval to expect the error
        cell.metadata["tags"] = ["raises-exception"]
    return cell


def opening(*queues: str) -> list:
    names = ", ".join(f'"{q}"' for q in queues)
    return [
        code("%load_ext emq_notebook\n%emq connect"),
        md(
            "`%emq connect` with no URL uses `EMQ_URL` when it is set, else the embedded "
            "default (an in-process fakeredis with Lua). The next cell gives this demo its "
            "own empty queues. A demo seeds and destroys, so it writes only to queues it "
            "made itself: when the server already holds a queue of the same name that no "
            "demo made, that cell stops with `QueueInUse` before writing anything."
        ),
        code(f"import emq_notebook as emq\n\nconn = emq.demo.fresh(emq.current(), {names})"),
    ]


DEMOS: dict[str, list] = {}

DEMOS["00-quickstart"] = [
    md("""
# Quickstart: a queue, a claim, a panel

`emq_notebook` is the operator plane for EchoMQ queues on Valkey. Every verb is a
real, fenced transition (a Lua script on the server) that either succeeds or refuses
with a typed reason. This notebook runs on the embedded default: nothing to install
beyond the package."""),
    *opening("mailers"),
    md(
        "Enqueue three jobs. A payload is JSON text; here the ids are given so the story reads the same every run."
    ),
    code("""
%emq enqueue mailers '{"to": "ana@example.com", "template": "welcome"}' --id j_welcome_ana
for name in ("bo", "cy"):
    emq.jobs.enqueue(conn, "mailers", f'{{"to": "{name}@example.com", "template": "welcome"}}', id=f"j_welcome_{name}")
"""),
    code("%emq status mailers"),
    code("%emq jobs mailers"),
    md(
        "A worker claims the head of pending: `(id, payload, attempts)`. The job moves to `active` with a lease deadline."
    ),
    code("%emq claim mailers --lease 5m"),
    code(
        "active = %emq jobs mailers --state active\nactive.drop(columns='at')   # `at` is the lease deadline, a UTC time"
    ),
    code("bool(active['at'].notna().all())"),
    md("""
## The claim gate

Pause is a field on `emq:{mailers}:meta`, not a move on any set. The claim reads it
first, in its own round trip; the claim script itself carries no pause logic. Toggle
the gate, then run a claim (the cells below click it for you)."""),
    code('gate = emq.widgets.ClaimGate(conn, "mailers")\ngate'),
    code("""
gate.gate.value = True          # the Paused toggle
gate.run_claim()
print(gate.status_text)
print(gate.trips_text)
"""),
    code("""
gate.gate.value = False         # Running again
gate.run_claim()
print(gate.status_text)
print(gate.trips_text)
"""),
    md(
        "## The queue panel\n\nCounts, the pause toggle, a confirmed drain and a confirmed, bounded obliterate."
    ),
    code('panel = emq.widgets.QueuePanel(conn, "mailers")\npanel'),
    code("panel.pause_button.click()\nprint(panel.status_text)\nprint(panel.snapshot)"),
    code("panel.pause_button.click()\nprint(panel.status_text)"),
    md("Every verb, one line each (`%emq VERB --help` for one verb's options):"),
    code("%emq help"),
]

DEMOS["01-pause-and-drain"] = [
    md("""
# Incident: a runaway producer

A deploy looped and enqueued hundreds of newsletters. Two are already being sent
(in flight), and the daily digest is a registered repeatable. The runbook: **pause**,
check that claims stop while the backlog stays intact, **drain** the backlog, check
that the in-flight jobs and the repeatable survived, **resume**."""),
    *opening("newsletters", "console"),
    code("""
for n in range(500):
    emq.jobs.enqueue(conn, "newsletters", f'{{"issue": 42, "copy": {n}}}', id=f"j_news{n:03}")
in_flight = [emq.jobs.claim(conn, "newsletters", 600_000)[0] for _ in range(2)]
emq.repeat.register(conn, "newsletters", "daily-digest", 86_400_000, '{"digest": true}')
in_flight
"""),
    code("%emq status newsletters"),
    md("## 1. Pause\n\nThe gate closes; no set moves."),
    code("%emq pause newsletters"),
    code("%emq claim newsletters"),
    code("%emq status newsletters"),
    md("The same gate as a widget: run a claim while paused, and the backlog is untouched."),
    code('gate = emq.widgets.ClaimGate(conn, "newsletters")\ngate'),
    code("gate.run_claim()\nprint(gate.status_text)\nprint(gate.trips_text)"),
    md(
        "## 2. Drain\n\nBounded calls of `--budget` jobs each, so a huge backlog never blocks Valkey in one script."
    ),
    code("%emq drain newsletters --budget 200"),
    code("%emq status newsletters"),
    md("The two in-flight jobs and the registered repeatable survived the drain:"),
    code("active = %emq jobs newsletters --state active\nactive[['state', 'attempts', 'payload']]"),
    code("[(r['name'], r['every_ms']) for r in emq.repeat.registered(conn, 'newsletters')]"),
    md("## 3. Resume\n\nThe producer is fixed; new work flows again."),
    code("%emq resume newsletters"),
    code("""%emq enqueue newsletters '{"issue": 43}' --id j_news_fixed\n%emq claim newsletters"""),
    md("""
## The operator console

Pick a verb and a queue state: the console shows the verb's precondition, what it
writes, its replies and its native form; **Try it** builds that state on a scratch
queue, runs the verb for real, and shows the reply and the keyspace difference."""),
    code("console = emq.widgets.OperatorConsole(conn)\nconsole"),
    code("""
for verb, state in [("pause", "running · job pending"),
                    ("drain", "paused · jobs in flight"),
                    ("obliterate", "running · job pending"),
                    ("reprocess_job (native twin)", "running · grouped job dead")]:
    console.verb.value, console.state.value = verb, state
    reply, changes = console.try_it()
    print(f"{verb} on {state!r}: {reply}")
    for line in changes:
        print("   ", line)
"""),
]

DEMOS["02-dead-letters"] = [
    md("""
# Incident: a worker with a bug fills the dead set

The mailer worker crashes on recipients without an `@` and on a missing template.
Each job gets two attempts, then it is dead. The runbook: look at the dead letters
grouped by `last_error`, mend payloads, reprocess one, then all (bounded), and check
that the counters are kept."""),
    *opening("mailers"),
    code("""
import json, time

recipients = ["ana@example.com", "bo.example.com", "cy@example.com", "di.example.com",
              "ed@example.com", "flo.example.com", "gus@example.com", "hal@example.com"]
for n, to in enumerate(recipients):
    template = "welcome" if n != 6 else "weclome"
    emq.jobs.enqueue(conn, "mailers", json.dumps({"to": to, "template": template}),
                     id=f"j_mail{n}", max_attempts=2, backoff_ms=1)

def buggy_mailer(job_id, payload, attempts):
    msg = json.loads(payload)
    if "@" not in msg["to"]:
        raise ValueError(f"SMTP 553: bad recipient {msg['to']!r}")
    if msg["template"] != "welcome":
        raise KeyError(f"template {msg['template']!r}")

worker = emq.Worker(conn, "mailers", buggy_mailer)
while emq.admin.job_count(conn, "mailers") > conn.client.zcard("emq:{mailers}:dead"):
    worker.run(until_empty=True)
    time.sleep(0.01)       # let the 1 ms retry backoff come due
(worker.completed, worker.failed)
"""),
    code("%emq status mailers"),
    md("## The dead letters, grouped by the error"),
    code("dead = %emq jobs mailers --state dead\ndead[['attempts', 'failures', 'last_error', 'payload']]"),
    code("dead.groupby('last_error').size()"),
    md(
        "## Mend one payload, reprocess it\n\n`data` takes JSON and refuses malformed JSON before anything is written."
    ),
    code("""%emq data mailers j_mail1 '{"to": "bo@example.com", "template": "welcome"}'"""),
    code("%emq reprocess mailers j_mail1"),
    md("The counters stay (`attempts`, `failures`); `last_error` is gone and the state is pending:"),
    code("%emq job mailers j_mail1"),
    md(
        "A job that is not dead is refused, and nothing changes: the refusal is an answer, printed on one line."
    ),
    code("%emq reprocess mailers j_mail1"),
    code("%emq reprocess mailers j_mail0"),
    md("## Mend the rest, then reprocess all dead, bounded"),
    code("""
for job_id, row in dead.drop(index="j_mail1").iterrows():
    msg = json.loads(row.payload)
    msg["to"] = msg["to"] if "@" in msg["to"] else msg["to"].replace(".", "@", 1)
    msg["template"] = "welcome"
    emq.jobs.update_data(conn, "mailers", job_id, json.dumps(msg))
"""),
    code('panel = emq.widgets.DeadLetterPanel(conn, "mailers")\npanel'),
    code("%emq reprocess mailers --all-dead --budget 2"),
    code("%emq status mailers"),
    md("The fixed worker drains the queue; the metrics hashes record the incident per minute."),
    code("""
fixed = emq.Worker(conn, "mailers", lambda job_id, payload, attempts: None)
fixed.run(until_empty=True)
"""),
    code("m = %emq metrics mailers --since 1h\nm.sum()"),
]

DEMOS["03-progress-and-logs"] = [
    md("""
# A long job: progress, logs and the events view

A nightly report runs for a long time. The worker writes progress (which is also
published on `emq:{reports}:events`) and appends log lines; the operator watches
the events live and keeps the log bounded with `--keep`."""),
    *opening("reports"),
    code("""
%emq enqueue reports '{"report": "nightly-revenue"}' --id j_nightly
%emq claim reports --lease 10m
"""),
    md("The events view subscribes before it returns, so every event after this cell shows up in it."),
    code('view = emq.widgets.EventsView(conn, "reports")\nview'),
    code("""
for pct in (25, 50, 75):
    emq.jobs.update_progress(conn, "reports", "j_nightly", str(pct))
    emq.jobs.add_log(conn, "reports", "j_nightly", f"section {pct // 25} of 4 rendered")
"""),
    code("%emq progress reports j_nightly 100"),
    code("%emq log reports j_nightly all sections rendered --keep 3"),
    code("%emq logs reports j_nightly"),
    md("Only the last three lines were kept. The job's row carries the progress:"),
    code("%emq job reports j_nightly"),
    code("%emq complete reports j_nightly"),
    code("""
import time
deadline = time.time() + 5
while view.seen < 5 and time.time() < deadline:
    time.sleep(0.05)
view.stop()
[(e["event"], e.get("progress")) for e in view.events]
"""),
    md("The job completed, so its row and logs are gone (there is no completed set):"),
    code("%emq logs reports j_nightly"),
]

DEMOS["04-retire-a-queue"] = [
    md("""
# Retiring a queue: a bounded obliterate

The `legacy` queue is being retired. Obliterate is gated by the checks an operator
would make by hand: the queue must be **paused**, and (unless forced) have **no jobs in
flight**. Each call is bounded by a budget and answers `more` until the queue is gone;
afterwards nothing is left under `emq:{legacy}:`."""),
    *opening("legacy"),
    code("""
for n in range(2000):
    emq.jobs.enqueue(conn, "legacy", f'{{"n": {n}}}', id=f"j_old{n:04}", dedup=f"order-{n}" if n % 10 == 0 else None)
emq.jobs.add_log(conn, "legacy", "j_old0000", "kept for audit")
emq.jobs.enqueue(conn, "legacy", '{"tenant": "acme"}', id="j_lane1", group="acme")
emq.repeat.register(conn, "legacy", "hourly", 3_600_000, "{}")
emq.jobs.claim(conn, "legacy", 600_000)
"""),
    code("%emq status legacy"),
    md("Refused on a running queue, and nothing changes:"),
    code("%emq obliterate legacy"),
    code("%emq pause legacy"),
    md("Refused with a job in flight:"),
    code("%emq obliterate legacy"),
    md("One bounded call, forced, answers `more` (a queue this big needs `--yes` for a single step too):"),
    code("%emq obliterate legacy --force --step --budget 500 --yes"),
    md(
        "The whole loop asks for confirmation on a queue this big, stating the count (this cell raises on purpose):"
    ),
    code("# raises on purpose: the confirmation\n%emq obliterate legacy --force --budget 500"),
    code("%emq obliterate legacy --force --budget 500 --yes"),
    md(
        "The footprint is zero: rows, logs, the lane, the repeatable, the dedup keys, the metrics and meta are gone."
    ),
    code("sorted(conn.client.scan_iter(match='emq:{legacy}:*'))"),
    code("len(emq.footprint.footprint(conn, 'legacy'))"),
]

DEMOS["05-grouped-lanes"] = [
    md("""
# Grouped lanes: per-tenant limits

Each tenant's jobs wait in their own lane (`emq:{tenants}:g:<g>:pending`) with a
concurrency limit; the grouped claim serves runnable lanes round-robin. Removing an
in-flight grouped job gives its lane slot back, and a grouped dead job is reprocessed
into its lane."""),
    *opening("tenants"),
    code("""
%emq lane-set tenants acme --limit 2
%emq lane-set tenants globex --limit 1
for n in range(3):
    emq.jobs.enqueue(conn, "tenants", f'{{"tenant": "acme", "n": {n}}}', id=f"j_acme{n}", group="acme", max_attempts=1)
    emq.jobs.enqueue(conn, "tenants", f'{{"tenant": "globex", "n": {n}}}', id=f"j_globex{n}", group="globex", max_attempts=1)
emq.lanes.lanes(conn, "tenants")
"""),
    md("Round-robin across lanes, each held to its limit (acme 2, globex 1):"),
    code("[(emq.lanes.claim(conn, 'tenants', 50) or ('none',))[0] for _ in range(4)]"),
    code("emq.lanes.lanes(conn, 'tenants')"),
    md("""
## A crashed worker's grouped job

The worker holding `j_acme0` died: its 50 ms lock lapsed before the lease sweep ran.
Removing the job gives acme's slot back, so the next acme job can run."""),
    code("time = __import__('time'); time.sleep(0.2)\n%emq remove tenants j_acme0"),
    code("emq.lanes.lanes(conn, 'tenants')['acme']"),
    code("%emq claim tenants --grouped"),
    md("## A grouped dead job goes back to its lane"),
    code("""
emq.jobs.fail(conn, "tenants", "j_globex0", "upstream 503")
dead = %emq jobs tenants --state dead
dead[["group", "attempts", "failures", "last_error"]]
"""),
    md(
        "The function executor carries the native twin's semantics, which refuse a grouped row; the script carries it to its lane:"
    ),
    code("""
native = conn.with_executor("function")
try:
    emq.jobs.reprocess_job(native, "tenants", "j_globex0")
except emq.Refused as refusal:
    print(refusal)
"""),
    code("%emq reprocess tenants j_globex0"),
    code(
        "emq.lanes.lanes(conn, 'tenants')['globex'], conn.client.zrange('emq:{tenants}:g:globex:pending', 0, -1)"
    ),
]


DEMOS["06-health-at-a-glance"] = [
    md("""
# Health at a glance: verdicts, latency and plots

The first question in an incident is "what is wrong with which queue". Every claim
stamps `claimed_at` on the row and counts the job's **wait** (claim time minus when
it became ready) into a per-minute histogram on the server; every complete or fail
counts its **run** time. `frames.health` reads counts, metrics, those histograms and
the two time fields of a few rows (never a payload) and gives each queue a verdict and
one sentence why, the most urgent first."""),
    *opening("mailers", "billing", "exports", "reports"),
    md(
        "Four queues, four stories: a steady mailer, a billing worker that declines most "
        "cards, an export backlog one worker cannot keep up with, and a paused report queue."
    ),
    code("""
import random, time

QUEUES = ["mailers", "billing", "exports", "reports"]
rng = random.Random(6)

def mailer(job_id, payload, attempts):
    time.sleep(rng.uniform(0.02, 0.06))          # 20-60 ms a mail

def charge(job_id, payload, attempts):
    if int(payload) % 4:
        raise RuntimeError("card declined")

for i in range(30):
    emq.jobs.enqueue(conn, "mailers", str(i), id=f"j_mail{i:02}")
for i in range(8):
    emq.jobs.enqueue(conn, "billing", str(i), id=f"j_bill{i}", max_attempts=1)
for i in range(40):
    emq.jobs.enqueue(conn, "exports", str(i), id=f"j_export{i:02}")
for i in range(5):
    emq.jobs.enqueue(conn, "reports", str(i), id=f"j_report{i}")
emq.admin.pause(conn, "reports")

emq.Worker(conn, "mailers", mailer).run(max_jobs=24)
emq.Worker(conn, "billing", charge).run(until_empty=True)
emq.Worker(conn, "exports", lambda *job: None).run(max_jobs=5)
"""),
    md(
        "## The verdicts\n\n`%emq health QUEUE` prints the verdict line first, then returns the frame; "
        "without a queue it judges every queue on the server and prints the problems, the "
        'most urgent first, then sums the rest ("and 3 ok, 1 idle").'
    ),
    code("h = %emq health mailers"),
    code("""
h = emq.frames.health(conn, QUEUES)
for q, row in h.iterrows():
    print(f"{q}: {row.verdict} — {row.why}")
h[["pending", "active", "dead", "paused", "claimed_5m", "completed_5m", "failed_5m",
   "failure_rate_5m", "verdict"]]
"""),
    md(
        "## For the systems that page people\n\n`emq exporter` serves these verdicts, the "
        "counts, the throughput counters and the latency histograms to Prometheus, and "
        "`emq check` says the problems to cron or a Nagios-compatible monitor "
        "([docs/monitoring.md](../../docs/monitoring.md)). `monitor.samples` shows what one "
        "scrape carries (here this demo's counts and verdicts that are not 0; a scrape "
        "carries every queue of the server):"
    ),
    code("""
scraped = emq.monitor.samples(emq.monitor.collector(conn))
shown = scraped.metric.isin(["emq_jobs", "emq_queue_verdict"]) & (scraped.value > 0)
scraped[shown & scraped.queue.isin(QUEUES)].reset_index(drop=True)
"""),
    code("%emq check mailers billing exports reports"),
    md(
        "The same queues judged ten minutes from now, had every worker stopped: the "
        "backlogs are stuck (`now_ms` judges at another time than the server's clock)."
    ),
    code("""
later = conn.server_ms() + 10 * 60_000
for q, row in emq.frames.health(conn, ["mailers", "exports"], now_ms=later).iterrows():
    print(f"{q}: {row.verdict} — {row.why}")
"""),
    md(
        "## Wait and run time\n\nPercentiles per minute, in ms, from the histograms "
        "(within 10% of the exact value). Every mail slept at least 20 ms, so its run "
        "time is at least that (a minute in which a mail was claimed but none had finished "
        "yet has no run sample: NaN):"
    ),
    code("""
lat = %emq latency mailers
runs = lat["run_p50"].dropna()
int(lat["n"].sum()), len(runs) > 0 and bool((runs >= 19).all()), list(lat.columns)
"""),
    md(
        "## Plots\n\nThe figures are matplotlib `Figure`s: titles, units, UTC time on the x axis. "
        "(nbval compares their text; an image is not compared.)"
    ),
    code("%emq plot mailers"),
    code("%emq plot mailers latency --since 30m"),
    md(
        "Every queue at once, coloured by verdict (its height follows the number of queues "
        "on the server, so this cell's output is not compared):"
    ),
    code("# NBVAL_IGNORE_OUTPUT\nemq.plots.overview(conn)"),
    md(
        "## Live views\n\n`MetricsView` redraws both plots every few seconds in one "
        "background thread, with a Stop button and the time of the last refresh; "
        "`HealthView` shows every verdict, coloured. Their outputs carry the time they "
        "were drawn, so the next cells check what they show instead."
    ),
    code(
        '# NBVAL_IGNORE_OUTPUT\nmetrics_view = emq.widgets.MetricsView(conn, "mailers", refresh_every=5)\nmetrics_view'
    ),
    code("""
metrics_view.stop()
metrics_view.refreshes >= 1, [o["data"]["text/plain"] for o in metrics_view.out.outputs], metrics_view.summary["claimed"]
"""),
    code("# NBVAL_IGNORE_OUTPUT\nhealth_view = emq.widgets.HealthView(conn, QUEUES)\nhealth_view"),
    code("health_view.verdicts"),
]


def write(name: str, cells: list) -> Path:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = OUT / f"{name}.ipynb"
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(OUT)}}
    )
    client.execute()
    for n, cell in enumerate(nb.cells):
        cell.id = f"{name[:2]}-{n:02}"  # stable ids: quiet diffs
        if cell.cell_type == "code":
            cell.metadata = {k: v for k, v in cell.metadata.items() if k != "execution"}
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    os.environ.pop("EMQ_URL", None)  # stored outputs come from the embedded default
    for name in sys.argv[1:] or DEMOS:
        print("wrote", write(name, DEMOS[name]))
