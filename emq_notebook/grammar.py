"""The command grammar: one argparse parser for `%emq` and the `emq` shell command.

Parsing only -- `commands.py` does the work.  A line that does not parse raises
`UsageProblem` (an `EMQError` that renders as one line and FAILS a notebook
cell; IPython's plain UsageError would not, see ../shared/JUPYTER.md).
"""

from __future__ import annotations

import argparse
import re
import shlex

from .errors import UsageProblem
from .keyspace import STATES

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?\Z")


def duration_ms(text: str) -> int:
    """`250ms`, `30s`, `5m`, `1h`, `2d` (a bare number is milliseconds) -> ms."""
    m = _DURATION.match(str(text).strip())
    if not m:
        raise UsageProblem(f"bad duration {text!r}: use e.g. 250ms, 30s, 5m, 1h")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "ms"])


# argparse reports an ArgumentTypeError's own text: "argument --budget: 0 must be >= 1"
def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def _delay(text: str) -> int:
    try:
        return duration_ms(text)
    except UsageProblem as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _duration(text: str) -> int:
    value = _delay(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be at least 1ms")
    return value


class _Parser(argparse.ArgumentParser):
    """Raises instead of printing and exiting."""

    def error(self, message: str):
        verb = self.prog.split()[-1]
        hint = "%emq help" if verb == "emq" else f"%emq {verb} --help"
        raise UsageProblem(f"{message} — see {hint}")

    def exit(self, status=0, message=None):
        raise UsageProblem(message or "bad command")


# verb -> (summary, [(args, kwargs), ...]); the order is the order of `help`
VERBS: dict[str, tuple[str, list]] = {
    "connect": ("connect (no URL: EMQ_URL, else the embedded default)", [
        (["url"], dict(nargs="?", help="redis://, rediss://, valkey://, valkeys:// or unix://")),
        (["--embedded"], dict(choices=["valkey", "fake"], help="a private embedded server")),
        (["--executor"], dict(choices=["script", "function", "native"], default="script")),
        (["--cluster"], dict(action="store_true", help="use the Valkey Cluster client")),
    ]),
    "queues": ("every queue with its counts", []),
    "status": ("one queue's counts, paused flag, lanes and repeatables", [(["queue"], {})]),
    "pause": ("close the claim gate (idempotent; no set moves)", [(["queue"], {})]),
    "resume": ("open the claim gate (idempotent)", [(["queue"], {})]),
    "drain": ("delete the pending backlog; active jobs and repeatables survive", [
        (["queue"], {}),
        (["--include-schedule"], dict(action="store_true", help="the schedule set too")),
        (["--budget"], dict(type=_whole, default=1000, help="jobs per bounded call")),
        (["--yes"], dict(action="store_true", help="confirm a backlog of many jobs")),
    ]),
    "obliterate": ("destroy a PAUSED queue, bounded; refuses not_paused / active", [
        (["queue"], {}),
        (["--force"], dict(action="store_true", help="also destroy jobs in flight")),
        (["--budget"], dict(type=_whole, default=1000, help="jobs per bounded call")),
        (["--step"], dict(action="store_true", help="ONE bounded call: answers more or ok")),
        (["--yes"], dict(action="store_true", help="confirm a queue holding many jobs")),
    ]),
    "jobs": ("a frame of jobs with their rows", [
        (["queue"], {}),
        (["--state"], dict(choices=[*STATES, "all"], default="all")),
        (["--limit"], dict(type=_whole, help="at most N jobs per set")),
    ]),
    "job": ("one job's row", [(["queue"], {}), (["id"], {})]),
    "data": ("replace a job's payload (JSON)", [(["queue"], {}), (["id"], {}), (["json"], {})]),
    "progress": ("write a job's progress and publish the event", [
        (["queue"], {}), (["id"], {}), (["value"], {})]),
    "log": ("append a line to a job's logs", [
        (["queue"], {}), (["id"], {}), (["line"], dict(nargs="+")),
        (["--keep"], dict(type=_whole, help="trim to the last N lines"))]),
    "logs": ("a job's log lines", [(["queue"], {}), (["id"], {})]),
    "remove": ("remove a job; refuses gone / locked", [
        (["queue"], {}), (["id"], {}), (["--dedup"], dict(help="release this dedup key"))]),
    "reprocess": ("move a dead job (or all dead, bounded) back to pending", [
        (["queue"], {}), (["id"], dict(nargs="?")),
        (["--all-dead"], dict(action="store_true")),
        (["--budget"], dict(type=_whole, default=1000)),
        (["--limit"], dict(type=_whole, help="at most N jobs in all"))]),
    "metrics": ("completed / failed per minute", [
        (["queue"], {}), (["--since"], dict(type=_duration, help="e.g. 1h"))]),
    "enqueue": ("add a job", [
        (["queue"], {}), (["json"], {}),
        (["--group"], {}), (["--delay"], dict(type=_delay, default=0)),
        (["--id"], {}), (["--priority"], dict(type=int, default=0)),
        (["--attempts"], dict(type=_whole, default=3)), (["--dedup"], {})]),
    "claim": ("claim the head of pending (or the next lane with --grouped)", [
        (["queue"], {}), (["--lease"], dict(type=_duration, default=30_000)),
        (["--grouped"], dict(action="store_true"))]),
    "complete": ("finish a claimed job", [(["queue"], {}), (["id"], {})]),
    "fail": ("fail a claimed job (retry or dead)", [
        (["queue"], {}), (["id"], {}), (["error"], dict(nargs="+"))]),
    "lane": ("a lane's limit or pause", [
        (["queue"], {}), (["group"], {}), (["--limit"], dict(type=_whole)),
        (["--pause"], dict(action="store_true")), (["--resume"], dict(action="store_true"))]),
    "watch": ("live events of a queue", [
        (["queue"], {}), (["--seconds"], dict(type=float, default=None,
                                             help="stop after N seconds (the shell waits 10s)"))]),
    "panel": ("the queue panel (with an id: the job panel; --dead: dead letters)", [
        (["queue"], {}), (["id"], dict(nargs="?")), (["--dead"], dict(action="store_true"))]),
    "help": ("the grammar, or one verb's options", [(["topic"], dict(nargs="?", metavar="VERB"))]),
}


def _metavar(names: list[str], kw: dict) -> str | None:
    if not names[0].startswith("-"):
        return kw.get("metavar", names[0].upper())
    if kw.get("action") == "store_true" or "choices" in kw:
        return None
    known = {_whole: "N", int: "N", _delay: "DURATION", _duration: "DURATION"}
    return known.get(kw.get("type"), names[0].lstrip("-").upper())


def _usage_word(names: list[str], kw: dict) -> str:
    """How one argument reads in the grammar: QUEUE, [ID], LINE..., [--budget N]."""
    meta = _metavar(names, kw)
    if not names[0].startswith("-"):
        return {"?": f"[{meta}]", "+": f"{meta}..."}.get(kw.get("nargs"), meta)
    if "choices" in kw:
        return f"[{names[0]} {'|'.join(kw['choices'])}]"
    return f"[{names[0]}]" if meta is None else f"[{names[0]} {meta}]"


def usage(verb: str) -> str:
    return " ".join([verb, *(_usage_word(n, kw) for n, kw in VERBS[verb][1])])


def parser() -> _Parser:
    top = _Parser(prog="emq", add_help=False)
    sub = top.add_subparsers(dest="verb", parser_class=_Parser)
    for verb, (summary, args) in VERBS.items():
        p = sub.add_parser(verb, add_help=False, help=summary, description=summary,
                           usage=f"%%emq {usage(verb)}")
        for names, kw in args:
            meta = _metavar(names, kw)
            p.add_argument(*names, **({**kw, "metavar": meta} if meta and "choices" not in kw else kw))
        p.add_argument("--help", "-h", action="store_true", dest="show_help",
                       help="this verb's options")
    return top


_PARSER = parser()


def verb_help(verb: str) -> str:
    """One verb's usage and options."""
    if verb not in VERBS:
        raise UsageProblem(f"unknown verb {verb!r} — see %emq help")
    action = next(a for a in _PARSER._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[verb].format_help()


def grammar() -> str:
    """The whole grammar, one verb a line (what `%emq?` and `%emq help` show)."""
    lines = ["%emq VERB QUEUE [ID] [options]   (%emq VERB --help for one verb)", ""]
    for verb, (summary, _) in VERBS.items():
        lines.append(f"  {usage(verb)}")
        lines.append(f"      {summary}")
    lines += ["", "Durations: 250ms, 30s, 5m, 1h.  A refusal prints one line with its reason",
              "(gone, locked, not_dead, not_paused, active) and is returned, not raised."]
    return "\n".join(lines)


def parse(line: str | list[str]) -> argparse.Namespace:
    """Parse one command line (a string, or argv words) into a namespace with `.verb`."""
    try:
        words = shlex.split(line) if isinstance(line, str) else list(line)
    except ValueError as exc:
        raise UsageProblem(f"cannot split the line: {exc}") from None
    if not words:
        raise UsageProblem("no verb — see %emq help")
    if words[0] not in VERBS:
        raise UsageProblem(f"unknown verb {words[0]!r} — see %emq?")
    if "--help" in words[1:] or "-h" in words[1:]:
        return argparse.Namespace(verb=words[0], show_help=True)
    return _PARSER.parse_args(words)
