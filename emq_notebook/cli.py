"""The shell front end: `emq [--url URL | --embedded fake|valkey] VERB QUEUE [ID] [options]`.

The same grammar, verbs and confirmation gate as `%emq` (the verb registry); the
settings come from `[tool.emq_notebook]` in the working directory's
`pyproject.toml`.  Frames print as text.  Exit status: 0 done, 1 refused (the one
line on stdout), 2 usage or runtime error (stderr).  Words are taken as the shell
gave them: no `{{name}}` substitution.

The server is `--url`, else `EMQ_URL`.  With neither, a reading verb reads an
in-process fakeredis that is gone when the command exits, and a writing verb is
refused (exit 2) unless `--embedded` asks for such a throwaway server by name: a
`pause` that paused nothing anybody runs must not say "paused".
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
from .decoding import shown_ids, visible
from .errors import EMQError, Refused, UsageProblem


class ShellSession(verbs.Session):
    surface = "shell"

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
    any terminal."""
    if value is None or isinstance(value, Refused):
        return
    if isinstance(value, pd.DataFrame):
        say(shown_ids(value).to_string() if len(value) else "(no rows)")
    elif isinstance(value, list):
        say("\n".join(map(str, value)))
    elif isinstance(value, dict):
        for k, v in value.items():
            say(f"{k}: {v}")
    else:
        say(value)


def say(text: object, **kw: Any) -> None:
    print(visible(text), **kw)


EXIT_CODES = "exit status: 0 done, 1 refused (its one line on stdout), 2 a usage or runtime error (stderr)"
NOTES = [
    "Durations: 250ms, 30s, 5m, 1h.  A refusal prints one line with its reason (gone,",
    "locked, not_dead, not_paused, active) and exits 1.  Words are taken as the shell",
    'gives them: quote a JSON payload once (\'{"to": "a@b"}\').  Settings (confirm_above,',
    "budget, default_limit, executor, env) come from [tool.emq_notebook] in ./pyproject.toml.",
]


def _parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="emq",
        usage="emq [--url URL | --embedded {fake,valkey}] [--executor E] [--read-only] [--env ENV] "
        "VERB QUEUE [ID] [options]",
        description="EchoMQ operator plane: drive the queues of a Valkey (or Redis) server from a shell.",
        add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument(
        "--url", help="the server: redis://, rediss://, valkey://, valkeys://, unix:// (default: EMQ_URL)"
    )
    top.add_argument(
        "--embedded",
        choices=["fake", "valkey"],
        help="a throwaway server of this process (in-process fakeredis, or a private valkey), "
        "gone when emq exits; a writing verb without --url or EMQ_URL needs it said",
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
    return top


def shell_help() -> str:
    """What `emq`, `emq -h`, `emq --help` and `emq help` print: the shell's own options,
    its exit codes, then every verb."""
    listed = ["verbs (emq help VERB, or emq VERB -h, for one verb's options):", *grammar.verb_lines()]
    return "\n".join([_parser().format_help().rstrip(), "", EXIT_CODES, "", *listed, "", *NOTES])


def _writes(ns: argparse.Namespace) -> bool:
    """True when the parsed command changes a queue (a dry run included: it reads a
    queue it was told to change)."""
    return registry.VERBS[ns.verb].writes


def _refuse_a_throwaway_write(ns: argparse.Namespace, opts: argparse.Namespace) -> None:
    """No URL, no EMQ_URL and no --embedded: a writing verb would write to a server that
    is gone when emq exits, and report success. Refused, before any I/O."""
    if opts.url is None and opts.embedded is None and not os.environ.get("EMQ_URL") and _writes(ns):
        raise UsageProblem(
            f"{ns.verb} writes, and no server is named: set EMQ_URL or pass --url "
            "(--embedded fake for a throwaway in-process server)"
        )


def main(argv: list[str] | None = None) -> int:
    opts, rest = _parser().parse_known_args(argv)
    if not rest or (len(rest) == 1 and rest[0] in ("-h", "--help", "help")):
        say(shell_help())
        return 0
    if rest[0] in verbs.monitor.SHELL:  # their own read-only connection and exits (Nagios codes)
        return verbs.monitor.shell(ShellSession(say=say), opts, rest)
    try:
        session = ShellSession(say=say, settings=settings.load())
        ns = grammar.parse(rest)
        shows_help = getattr(ns, "show_help", False)
        if registry.VERBS[ns.verb].needs_server and not shows_help:
            _refuse_a_throwaway_write(ns, opts)
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
    except EMQError as exc:
        say(f"emq: {audit.failure_line(exc)}", file=sys.stderr)
        return 2
    show(result)
    return 1 if isinstance(result, Refused) else 0


if __name__ == "__main__":
    sys.exit(main())
