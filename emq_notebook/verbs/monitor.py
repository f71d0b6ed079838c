"""The monitor's verbs (`emq_notebook.monitor`): `check`, a Nagios-style check of the
queues, and `exporter`, the Prometheus exporter. Both read only.

In the shell (`shell`, which `emq check` and `emq exporter` go through) each opens a
read-only connection of its own, every read and connect bounded by
`defaults.MONITOR_TIMEOUT_S`,
to `--url` or `EMQ_URL` (no throwaway in-process server unless `--embedded` says so:
an empty server would check OK). `emq check` prints its first line `EMQ <STATUS> -
<summary>`, then a line a problem (or one line of JSON), and exits with the Nagios
code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN -- the server unreachable or the
arguments bad, said in that one line. `emq exporter` serves /metrics until SIGTERM or
SIGINT, then exits 0 (its lines, where it listens and that it stopped, on stderr).

What is WARNING and what CRITICAL, plainly: a queue whose verdict is named by
`--critical-verdicts` (default failing) is CRITICAL, by `--verdicts` (default failing,
stuck, growing) WARNING; more dead jobs than `--critical-dead-above` is CRITICAL, than
`--dead-above` WARNING; an oldest pending job that has waited longer than
`--critical-age-above` is CRITICAL, than `--age-above` WARNING. `none` names no verdict.

In a notebook `%emq check` prints the same lines and returns the `monitor.Check`;
`%emq exporter` serves from the kernel's process and returns the running
`monitor.Exporter` (`.stop()` ends it).
"""

from __future__ import annotations

import argparse
import os
import sys
from argparse import Namespace
from typing import TYPE_CHECKING, Any

from .. import defaults, grammar, health, settings
from ..audit import failure_line
from ..connector import connect
from ..decoding import visible
from ..errors import EMQError, UsageProblem
from ..grammar import duration, whole_arg
from ..registry import arg, opt, verb
from .session import Session, execute

if TYPE_CHECKING:
    from .. import monitor

# the verbs `emq` runs through `shell`: their own connection and exits
SHELL = ("check", "exporter")


def verdict_list(text: str) -> tuple[str, ...]:
    """`failing,stuck` -> the verdicts named, each one of health's; `none` -> none."""
    if text.strip() == "none":
        return ()
    named = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in named if v not in health.SEVERITY]
    if bad or not named:
        raise argparse.ArgumentTypeError(
            f"{text!r}: name verdicts from {', '.join(health.SEVERITY)} (comma-separated), or none"
        )
    return named


def verdicts_option(flag: str, default: tuple[str, ...], what: str) -> Any:
    """A `--...verdicts LIST` option of `check`."""
    said = f"{what} (default {','.join(default)}; none: none)"
    return opt(flag, type=verdict_list, default=default, metavar="LIST", help=said)


_LISTEN = f"{defaults.EXPORTER_HOST}:{defaults.EXPORTER_PORT}"


def dead_count(text: str) -> int:
    """A number of dead jobs, 0 or more."""
    return 0 if text.strip() == "0" else whole_arg(text)


def listen(text: str) -> tuple[str, int]:
    from .. import monitor

    try:
        return monitor.listen_address(text)
    except EMQError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@verb(
    "check",
    "a Nagios-style check: EMQ OK|WARNING|CRITICAL|UNKNOWN, exit 0|1|2|3",
    arg("queue", many=True, metavar="QUEUE", help="the queues to check (default: every queue)"),
    opt("--dead-above", type=dead_count, metavar="N", help="WARNING when a queue holds more than N dead"),
    opt("--age-above", type=duration, help="WARNING when the oldest pending job waited longer, e.g. 30m"),
    verdicts_option("--verdicts", defaults.CHECK_VERDICTS, "the verdicts that are problems"),
    opt("--critical-dead-above", type=dead_count, metavar="N", help="CRITICAL when more than N dead"),
    opt("--critical-age-above", type=duration, help="CRITICAL when the oldest pending job waited longer"),
    verdicts_option(
        "--critical-verdicts", defaults.CHECK_CRITICAL_VERDICTS, "the verdicts that are CRITICAL"
    ),
    opt("--json", action="store_true", help="the result as one line of JSON"),
)
def _check(s: Session, ns: Namespace) -> monitor.Check:
    from .. import monitor  # prometheus_client, loaded by the first check or exporter

    result = monitor.check(
        s.conn,
        ns.queue or None,
        dead_above=ns.dead_above,
        age_above_s=None if ns.age_above is None else ns.age_above / 1000,
        verdicts=ns.verdicts,
        critical_verdicts=ns.critical_verdicts,
        critical_dead_above=ns.critical_dead_above,
        critical_age_above_s=None if ns.critical_age_above is None else ns.critical_age_above / 1000,
    )
    s.say(result.json() if ns.json else result.text())
    return result


@verb(
    "exporter",
    "the Prometheus exporter: serves /metrics (the shell: until SIGTERM)",
    opt(
        "--listen",
        type=listen,
        default=(defaults.EXPORTER_HOST, defaults.EXPORTER_PORT),
        metavar="HOST:PORT",
        help=f"where to listen (default {_LISTEN}; port 0: any free port)",
    ),
)
def _exporter(s: Session, ns: Namespace) -> monitor.Exporter:
    from .. import monitor

    host, port = ns.listen
    exporter = monitor.serve(s.conn, host, port)
    s.say(f"serving {exporter.url} for {s.conn.describe()} from this kernel; .stop() ends it")
    return exporter


def shell(session: Session, opts: Namespace, words: list[str]) -> int:
    """`emq check ...` and `emq exporter ...` (`words`, the verb first; `opts`, the
    shell's own options): a read-only connection of their own, then the verb. Answers
    the exit status: the check's Nagios code (3, one line, for anything that kept it
    from looking), the exporter's 0 once stopped, or 2 with its line on stderr when it
    could not start."""
    from .. import monitor

    checking = words[0] == "check"
    try:
        ns = grammar.parse(words, front=session.front)
        if ns.show_help:
            execute(session, ns)
            return 0
        session.settings = settings.load()
        url = opts.url or os.environ.get("EMQ_URL") or None
        if url is None and opts.embedded is None:
            raise UsageProblem(
                f"{ns.verb} needs a server: set EMQ_URL or pass --url (--embedded fake for a throwaway one)"
            )
        session.conn = connect(
            url,
            embedded=opts.embedded,
            executor=opts.executor or session.settings.executor,
            read_only=True,
            env=opts.env if opts.env is not None else session.settings.env,
            socket_timeout=monitor.TIMEOUT_S,
            socket_connect_timeout=monitor.TIMEOUT_S,
        )
        if not checking:
            # its lines on stderr as they come (stdout stays the caller's), not held
            host, port = ns.listen
            monitor.run(
                session.conn, host, port, say=lambda line: print(visible(line), file=sys.stderr, flush=True)
            )
            return 0
        result: monitor.Check = execute(session, ns)
    except Exception as exc:  # for the check, anything that kept it from looking is UNKNOWN
        if checking:
            said = failure_line(exc) if isinstance(exc, EMQError) else f"{type(exc).__name__}: {exc}"
            unknown = monitor.unknown(said)
            session.say(unknown.json() if "--json" in words else unknown.text())
            return unknown.code
        if not isinstance(exc, EMQError):
            raise
        print(visible(f"emq: {failure_line(exc)}"), file=sys.stderr)
        return 2
    return result.code
