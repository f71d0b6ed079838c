"""A real worker process for a staged incident (tests/test_runbooks_live.py):

    python tests/incident_worker.py URL QUEUE HANDLER LEASE_MS GROUPED SECONDS

HANDLER is `hang` (holds its job SECONDS: kill it to leave an expired lease),
`mailer` (raises on a recipient without an @, or a template that is not "welcome"),
or `tenant` (an acme job takes 6 s, any other lane's 10 ms). The worker stops by
itself after SECONDS, so a test that forgets it cannot leave it running. The tests
import `mailer` from here, so the staged incident and the worker share one bug.
"""

import json
import sys
import time

import emq_notebook as emq


def mailer(job_id, payload, attempts):
    msg = json.loads(payload)
    if "@" not in msg["to"]:
        raise ValueError(f"SMTP 553: bad recipient {msg['to']!r}")
    if msg.get("template") != "welcome":
        raise KeyError(f"template {msg.get('template')!r}")


def tenant(job_id, payload, attempts):
    time.sleep(6 if json.loads(payload).get("tenant") == "acme" else 0.01)


def main(url, queue, kind, lease_ms, grouped, seconds):
    seconds_f = float(seconds)

    def hang(job_id, payload, attempts):
        time.sleep(seconds_f)

    handler = {"hang": hang, "mailer": mailer, "tenant": tenant}[kind]
    worker = emq.Worker(
        emq.connect(url), queue, handler, lease_ms=int(lease_ms), grouped=grouped == "1", idle_sleep=0.02
    )
    print("ready", flush=True)
    worker.run(timeout=seconds_f)


if __name__ == "__main__":
    main(*sys.argv[1:7])
