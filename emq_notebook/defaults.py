"""The defaults and bounds every verb reads, named once.

A bounded call (find, errors, reprocess_dead, the filtered bulk verbs, drain,
obliterate, enqueue_many, the worker's promote and expire) does at most `budget`
members of work a call AND reads or frees about `BYTE_BUDGET` bytes a call; a budget
above `MAX_BUDGET` (`MAX_MOVE_BUDGET` for a call that moves the jobs it meets), a glob
longer than `MAX_GLOB` and a payload larger than `MAX_PAYLOAD` are refused before any
I/O, because no call may hold the server long (20 ms at most). The figures behind the
numbers are in bench/README.md (bench/scale.py, bench/harm.py).
"""

from __future__ import annotations

# members examined by one bounded call, when the caller names none: EchoMQ's own
# obliterate default, and a search's
DEFAULT_BUDGET = 1000
# the default of the calls that rewrite every job they move (reprocess_dead, promote,
# expire): a moved job costs about twice a drained one
MOVE_BUDGET = 500
# the default of the calls given their ids (reprocess_jobs; remove_jobs, whose removed
# job costs 2 of it): each id is looked up by itself (its row, its set, its lane)
ID_BUDGET = 250
# the most a caller may ask of one call
MAX_BUDGET = 1000
# the most a caller may ask of one call that rewrites each job it moves or writes
# (reprocess_dead, reprocess_jobs, promote, expire_leases, an enqueue_many chunk)
MAX_MOVE_BUDGET = 500
# bytes one bounded call reads or frees, about: row text a search reads, payloads a
# drain or an obliterate frees (a 100 MB payload is freed on the server's thread),
# payloads enqueue_many sends in one call. Common rows never reach it (1,000 rows of
# 100-byte payloads are 100 KB); it bounds the calls that meet large values
BYTE_BUDGET = 1 << 20
# what a bulk move counts for an id against BYTE_BUDGET: 16 times its bytes (it hashes
# and copies the id at each key and member it names; Lua's `ID_WORK` is rendered from
# this one), so the caller sends a call about the ids it can take
ID_WORK = 16
# rows a listing or a search answers when the caller names no limit
DEFAULT_LIMIT = 1000
# the largest payload a write sends (bytes of its UTF-8): a script writing a payload
# copies it two or three times on the server's thread
MAX_PAYLOAD = 4 << 20
# the most bytes of ONE field of a job row any read copies whole (`jobs.get_job`, a
# frame's payload), twice MAX_PAYLOAD: a longer field, which only another node can
# write, shows as `decoding.not_read` (its length), its bytes left on the server. A
# script reads fields up to BYTE_BUDGET only
MAX_WHOLE_FIELD = 8 << 20
# the longest glob a search takes (characters): matching costs text length x glob length
MAX_GLOB = 1000

# -- export, import and move (transfer.py) ------------------------------------
# how long a move's batch belongs to the call that took it: a later call finishes it once
# this has passed since its owner last held it (or when told its owner is gone)
MOVE_LEASE_MS = 30_000
# how long a target keeps the ids a batch wrote into it (`emq:{q}:arrived:<batch>`, a set
# deleted when the batch ends): a batch written again within it writes no job twice
ARRIVED_MS = 86_400_000
# the most log lines a move carries with a job (and at most BYTE_BUDGET bytes of them):
# a job with more stays where it is, said so
MOVE_LOG_LINES = 10_000

# -- the operator's settings' defaults (settings.py: each a `%config EMQMagics.<name>`) --
# how a connection runs the transitions: EVALSHA of the scripts, FCALL of the function
# library, or the EMQ.* commands of a module-loaded node
EXECUTORS = ("script", "function", "native")
# a command that destroys or moves more jobs than this asks for --yes, stating the count
CONFIRM_ABOVE = 1000
# a queue panel's and the dashboard's auto-refresh interval (seconds)
REFRESH_S = 2.0
# the health and metrics views' (seconds): each refresh reads minutes of history
VIEW_REFRESH_S = 5.0

# the audit trail's entries kept per queue (`XADD emq:audit:{q} MAXLEN ~`; the audit package)
AUDIT_KEEP = 10_000

# -- finding the queues (directory.py) ------------------------------------------
# a whole sweep of the keyspace starts at most this often in the background (seconds)
RESCAN_EVERY_S = 60.0
# keys one SCAN call examines
SCAN_COUNT = 10_000

# -- the monitor (monitor.py: `emq exporter`, `emq check`) -----------------------------
# where `emq exporter` listens unless told (9808: its number in Prometheus' list of
# exporter ports)
EXPORTER_HOST, EXPORTER_PORT = "127.0.0.1", 9808
# how long the exporter's and the check's connection waits on one read or connect
# (seconds): a stalled server costs a scrape this, then answers emq_up 0; under the 10 s
# a Nagios-compatible monitor gives a check before it kills it
MONITOR_TIMEOUT_S = 5.0
# the verdicts `emq check` counts as problems unless told, and those of them CRITICAL
CHECK_VERDICTS = ("failing", "stuck", "growing")
CHECK_CRITICAL_VERDICTS = ("failing",)
