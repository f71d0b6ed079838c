"""The shell front end: `emq [--url URL] VERB QUEUE [ID] [options]`.

The same grammar and verbs as `%emq`.  Frames print as text.  Exit status:
0 done, 1 refused (the one line on stdout), 2 usage or runtime error (stderr).
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from . import commands, grammar
from .connector import connect
from .errors import EMQError, Refused


class ShellSession(commands.Session):
    def widget(self, make):
        raise EMQError("panels need a notebook: use `%emq panel` in Jupyter")


def _watch(session: ShellSession, ns) -> None:
    """`emq watch Q`: print events as they arrive, for --seconds (default 10)."""
    from .events import follow

    seconds = 10.0 if ns.seconds is None else ns.seconds
    for event in follow(session.conn, ns.queue, seconds=seconds):
        print(event, flush=True)


def show(value) -> None:
    if value is None or isinstance(value, Refused):
        return
    if isinstance(value, pd.DataFrame):
        print(value.to_string() if len(value) else "(no rows)")
    elif isinstance(value, list):
        print("\n".join(map(str, value)))
    elif isinstance(value, dict):
        for k, v in value.items():
            print(f"{k}: {v}")
    else:
        print(value)


def main(argv: list[str] | None = None) -> int:
    top = argparse.ArgumentParser(prog="emq", description="EchoMQ operator plane (see `emq help`)",
                                  add_help=False)
    top.add_argument("--url", help="redis://, rediss://, valkey://, unix:// (default: EMQ_URL)")
    top.add_argument("--embedded", choices=["valkey", "fake"])
    top.add_argument("--executor", choices=["script", "function", "native"], default="script")
    opts, rest = top.parse_known_args(argv)
    session = ShellSession()
    try:
        ns = grammar.parse(rest or ["help"])
        if ns.verb != "help" and not getattr(ns, "show_help", False):
            session.conn = connect(opts.url, embedded=opts.embedded, executor=opts.executor)
        if ns.verb == "watch" and not getattr(ns, "show_help", False):
            _watch(session, ns)
            return 0
        result = commands.execute(session, ns)
    except EMQError as exc:
        print(f"emq: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    show(result)
    return 1 if isinstance(result, Refused) else 0


if __name__ == "__main__":
    sys.exit(main())
