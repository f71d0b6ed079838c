"""The shell front end: `emq [--url URL] VERB QUEUE [ID] [options]`.

The same grammar, verbs and confirmation gate as `%emq` (the verb registry); the
settings come from `[tool.emq_notebook]` in the working directory's
`pyproject.toml`.  Frames print as text.  Exit status: 0 done, 1 refused (the one
line on stdout), 2 usage or runtime error (stderr).  Words are taken as the shell
gave them: no `{{name}}` substitution.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import pandas as pd

from . import commands, grammar, registry, settings
from .connector import connect
from .decoding import visible
from .errors import EMQError, Refused


class ShellSession(commands.Session):
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
        say(value.to_string() if len(value) else "(no rows)")
    elif isinstance(value, list):
        say("\n".join(map(str, value)))
    elif isinstance(value, dict):
        for k, v in value.items():
            say(f"{k}: {v}")
    else:
        say(value)


def say(text: object, **kw: Any) -> None:
    print(visible(text), **kw)


def main(argv: list[str] | None = None) -> int:
    top = argparse.ArgumentParser(
        prog="emq", description="EchoMQ operator plane (see `emq help`)", add_help=False
    )
    top.add_argument("--url", help="redis://, rediss://, valkey://, unix:// (default: EMQ_URL)")
    top.add_argument("--embedded", choices=["valkey", "fake"])
    top.add_argument("--executor", choices=list(settings.EXECUTORS), default=None)
    top.add_argument("--read-only", action="store_true", help="refuse every writing verb")
    top.add_argument("--env", help="the env this server is (default: [tool.emq_notebook] env)")
    opts, rest = top.parse_known_args(argv)
    try:
        session = ShellSession(say=say, settings=settings.load())
        ns = grammar.parse(rest or ["help"])
        shows_help = getattr(ns, "show_help", False)
        if registry.VERBS[ns.verb].needs_server and not shows_help:
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
        result = commands.execute(session, ns)
    except EMQError as exc:
        say(f"emq: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    show(result)
    return 1 if isinstance(result, Refused) else 0


if __name__ == "__main__":
    sys.exit(main())
