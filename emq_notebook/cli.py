"""The shell front end: `emq [--url URL | --embedded fake|valkey] VERB QUEUE [ID] [options]`.

The same grammar, verbs and confirmation gate as `%emq`, in the shell's words (`emq
pause QUEUE`). Settings come from `[tool.emq_notebook]` in `./pyproject.toml`. Frames
print as text. Exit status: 0 done, 1 refused (its line on stdout), 2 any error (one
line on stderr), 130 interrupted. No `{{name}}` substitution; the shell's own options
come before the verb.

The server is `--url`, else `EMQ_URL`; with neither, a verb that needs a server is
refused (exit 2) unless `--embedded` asks for a throwaway one: a `pause` of a server
made for it must not say "paused".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import pandas as pd

from . import audit, defaults, grammar, registry, settings, verbs
from .connector import connect
from .decoding import one_line, shown_ids, visible
from .errors import EMQError, Refused, UsageProblem
from .redaction import scrub, secrets_of


class ShellSession(verbs.Session):
    surface = "shell"
    front = grammar.SHELL

    def widget(self, make: Callable[[], Any]) -> Any:
        raise EMQError("panels need a notebook: use `%emq panel` in Jupyter")


def _watch(session: ShellSession, ns: argparse.Namespace) -> None:
    """`emq watch Q`: print events as they arrive, for --seconds (default 10)."""
    from .events import follow

    seconds = 10.0 if ns.seconds is None else ns.seconds
    for event in follow(session.conn, ns.queue, seconds=seconds):
        say(event, flush=True)


def show(value: Any) -> None:
    """Print a verb's result as text. Every line goes through `visible`, so server
    text holding bytes that are not UTF-8 or control characters prints as `\\xNN` on
    any terminal; each item of a list and each key and value of a dict on its one line
    (`one_line`: a log line or a last_error holding a newline forges no line)."""
    if value is None or isinstance(value, Refused):
        return
    if isinstance(value, pd.DataFrame):
        say(shown_ids(value).to_string() if len(value) else "(no rows)")
    elif isinstance(value, list):
        say("\n".join(map(one_line, value)))
    elif isinstance(value, dict):
        for k, v in value.items():
            say(f"{one_line(k)}: {one_line(v)}")
    else:
        say(value)


def say(text: object, **kw: Any) -> None:
    print(visible(text), **kw)


EXIT_CODES = (
    "exit status: 0 done, 1 refused (its one line on stdout), 2 any error (one line on stderr), "
    "130 interrupted"
)
NOTES = [
    "The options above come before the verb: every word after the verb is the command's.",
    "Durations: 250ms, 30s, 5m, 1h.  A refusal prints one line with its reason (gone,",
    "locked, not_dead, not_paused, active) and exits 1.  Words are taken as the shell",
    'gives them: quote a JSON payload once (\'{"to": "a@b"}\').  Settings (confirm_above,',
    "budget, default_limit, executor, env) come from [tool.emq_notebook] in ./pyproject.toml.",
]


def _parser() -> argparse.ArgumentParser:
    """The shell's own options, before the verb; the words from the verb on are the
    command's (`command`), whatever they read (`--env` in a log line is the line's)."""
    top = grammar.Parser(
        prog="emq",
        usage="emq [--url URL | --embedded {fake,valkey}] [--executor E] [--read-only] [--env ENV] "
        "VERB QUEUE [ID] [options]",
        description="EchoMQ operator plane: drive the queues of a Valkey (or Redis) server from a shell.",
        add_help=False,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        front=grammar.SHELL,
    )
    top.add_argument("-h", "--help", action="store_true", help="this help")
    top.add_argument(
        "--url", help="the server: redis://, rediss://, valkey://, valkeys://, unix:// (default: EMQ_URL)"
    )
    top.add_argument(
        "--embedded",
        choices=["fake", "valkey"],
        help="a throwaway server of this process (in-process fakeredis, or a private valkey), "
        "gone when emq exits; without --url or EMQ_URL, every verb that reads or writes a server "
        "needs it said",
    )
    top.add_argument(
        "--executor",
        choices=list(defaults.EXECUTORS),
        default=None,
        help="how transitions run: script (EVALSHA), function (FCALL), native (EMQ.*); "
        "default: [tool.emq_notebook] executor",
    )
    top.add_argument("--read-only", action="store_true", help="refuse every writing verb before any I/O")
    top.add_argument(
        "--env",
        help="what this server is, e.g. production: every confirmation says it "
        "(default: [tool.emq_notebook] env)",
    )
    top.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return top


def shell_help() -> str:
    """What `emq`, `emq -h`, `emq --help` and `emq help` print: the shell's own options,
    its exit codes, then every verb."""
    listed = ["verbs (emq help VERB, or emq VERB -h, for one verb's options):", *grammar.verb_lines()]
    return "\n".join([_parser().format_help().rstrip(), "", EXIT_CODES, "", *listed, "", *NOTES])


def _refuse_a_throwaway_server(ns: argparse.Namespace, opts: argparse.Namespace) -> None:
    """No --url, no EMQ_URL and no --embedded: the command would run on a server made for
    it and gone when emq exits; a write would say what it did to a queue nobody runs, a
    read would show an empty server as if it were the one meant. Refused, before any I/O."""
    if opts.url is None and opts.embedded is None and not os.environ.get("EMQ_URL"):
        does = "writes" if registry.VERBS[ns.verb].writes else "reads"
        raise UsageProblem(
            f"{ns.verb} {does}, and no server is named: set EMQ_URL or pass --url "
            "(--embedded fake for a throwaway in-process server)"
        )


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (0 done, 1 refused, 2 any error, 130 interrupted,
    141 stopped by a closed stdout). An error of any kind is one line on stderr, no
    traceback, with no password of the command's words or of EMQ_URL in it."""
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        return _run(words)
    except KeyboardInterrupt:
        say("emq: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (`emq jobs q | head`): nothing more to say, to
        # anyone; 141 is a shell's status for a command a closed pipe stopped
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        secrets = [x for w in [*words, os.environ.get("EMQ_URL", "")] for x in secrets_of(w)]
        line = audit.failure_line(exc) if isinstance(exc, EMQError) else _first_line(exc)
        # one line whatever a server's or a library's text holds (a newline as backslash-n)
        say(one_line(f"emq: {scrub(line, secrets)}"), file=sys.stderr)
        return 2


def _first_line(exc: BaseException) -> str:
    """`FileNotFoundError: [Errno 2] ...`: an error the toolkit did not name, as one line."""
    said = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {said[0]}" if said else type(exc).__name__


# the shell's own options, which come before the verb
_OWN_OPTIONS = ("--url", "--embedded", "--executor", "--read-only", "--env")


def _run(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    rest = opts.command
    if opts.help or not rest or rest in (["-h"], ["--help"], ["help"]):
        say(shell_help())
        return 0
    if rest[0] in verbs.monitor.SHELL:  # their own read-only connection and exits (Nagios codes)
        return verbs.monitor.shell(ShellSession(say=say), opts, rest)
    session = ShellSession(say=say, settings=settings.load())
    try:
        ns = verbs.parse(session, rest)
    except UsageProblem as exc:
        misplaced = [w for w in rest if w.split("=", 1)[0] in _OWN_OPTIONS]
        if misplaced:
            raise UsageProblem(f"{exc} ({misplaced[0].split('=', 1)[0]} goes before the verb)") from None
        raise
    shows_help = getattr(ns, "show_help", False)
    if registry.VERBS[ns.verb].needs_server and not shows_help:
        _refuse_a_throwaway_server(ns, opts)
        session.conn = connect(
            opts.url,
            embedded=opts.embedded,
            executor=opts.executor or session.settings.executor,
            read_only=opts.read_only,
            env=opts.env if opts.env is not None else session.settings.env,
        )
    if ns.verb == "watch" and not shows_help:
        _watch(session, ns)
        return 0
    result = verbs.execute(session, ns)
    show(result)
    return 1 if isinstance(result, Refused) else 0


if __name__ == "__main__":
    sys.exit(main())
