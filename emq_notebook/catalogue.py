"""The verb catalogue: ONE table of what each operator verb requires, writes,
answers and how its native form reads.

The operator console shows it, the verbs' docstrings end with it, and the
README's verbs table is generated from it (a test keeps them equal), so the
three cannot drift apart.  `python -m emq_notebook.catalogue` prints the table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Verb:
    name: str          # the Python verb, module.function
    script: str        # the Lua transition it runs
    precondition: str
    writes: str
    replies: str
    native: str


CATALOGUE: dict[str, Verb] = {v.name: v for v in [
    Verb("admin.pause", "@pause", "none (idempotent)",
         "HSET emq:{q}:meta paused 1; publishes `paused`",
         "None — paused field set; the pending backlog is untouched",
         "none, a script only; EMQ.CLAIM reads the same paused field"),
    Verb("admin.resume", "@resume", "none (idempotent)",
         "HDEL emq:{q}:meta paused; publishes `resumed`",
         "None — a later claim serves the head of pending",
         "none, a script only"),
    Verb("admin.drain", "@drain", "none; bounded calls of `budget` jobs",
         "deletes pending (and lane, and with include_schedule scheduled) rows and :logs, "
         "releases their dedup keys; publishes `drained`",
         "int — the count drained; active jobs and the repeat registry survive",
         "none, a script only"),
    Verb("admin.obliterate", "@obliterate", "paused; unforced, no jobs in flight",
         "deletes up to `budget` jobs a call, then lanes, repeat records, metrics, dedup keys, "
         "orphans and meta; publishes `obliterated`",
         "\"more\" (call again) or \"ok\" (nothing left under emq:{q}:) / NotPaused / ActiveJobs",
         "none, a script only"),
    Verb("jobs.update_data", "@update_data", "the row exists",
         "HSET payload; publishes `data`", "None / Gone", "none, a script only"),
    Verb("jobs.update_progress", "@update_progress", "the row exists",
         "HSET progress; PUBLISH {event: progress, job, progress}", "None / Gone",
         "none, a script only"),
    Verb("jobs.add_log", "@add_log", "the row exists",
         "RPUSH :logs (LTRIM to the last `keep`)", "int — the list length / Gone",
         "none, a script only"),
    Verb("jobs.get_job_logs", "@get_logs", "the row exists", "nothing (a read)",
         "list[str] in append order ([] when empty) / Gone", "none, a script only"),
    Verb("jobs.remove_job", "@remove_job2", "the row exists and no worker holds it",
         "ZREM from its set and lane (a lane slot given back when in flight), DEL row and :logs, "
         "release dedup; publishes `removed`",
         "None / Gone / Locked (a :lock key or a lock field: untouched)", "none, a script only"),
    Verb("jobs.reprocess_job", "@reprocess2", "the row exists and is in dead",
         "ZREM dead, HDEL last_error, HSET state pending, ZADD pending 0 (a grouped job: its lane "
         "and the ring); counters kept; publishes `reprocessed`",
         "None / Gone / NotDead",
         "EMQ.REPROCESS 4 emq:{q}:job:<id> emq:{q}:dead emq:{q}:pending emq:{q}: <id> — reads "
         "dead membership before writing; refuses a grouped row (reprocess lane not native)"),
    Verb("jobs.get_job", "HGETALL", "the row exists", "nothing (a read)", "dict / Gone",
         "none, one command"),
]}


def describe(name: str) -> str:
    """The catalogue entry as the console (and a docstring) shows it."""
    v = CATALOGUE[name]
    return (f"{v.name} · {v.script}\n"
            f"precondition: {v.precondition}\n"
            f"writes: {v.writes}\n"
            f"replies: {v.replies}\n"
            f"native: {v.native}")


def document(fn):
    """Append the catalogue entry to a verb's docstring (a decorator)."""
    name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
    fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n" + "\n".join(
        "    " + line for line in describe(name).splitlines()[1:]) + "\n"
    return fn


def markdown() -> str:
    """The README's verbs table."""
    rows = ["| verb | script | precondition | replies | native |", "|---|---|---|---|---|"]
    for v in CATALOGUE.values():
        rows.append(f"| `{v.name}` | `{v.script}` | {v.precondition} | {v.replies} | {v.native} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown())
