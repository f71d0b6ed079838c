"""Documentation executed as written: a section's lines typed one by one into the
session's IPython shell, each line's answer read from its trailing comment."""

from __future__ import annotations

from typing import Any


def default_server(conn, monkeypatch) -> None:
    """`%emq connect` with no URL opens `conn`'s server: EMQ_URL names it, or is unset
    for the embedded fakeredis."""
    if conn.label == "embedded fakeredis":
        monkeypatch.delenv("EMQ_URL", raising=False)
    else:
        monkeypatch.setenv("EMQ_URL", conn.label)


def typed(ip, capfd, line: str) -> tuple[Any, str, str]:
    """(the ExecutionResult, what it printed, its comment after `  #`) of `line` run in
    `ip` as a person types it (stored in the history)."""
    capfd.readouterr()
    result = ip.run_cell(line, store_history=True)
    out = capfd.readouterr().out
    comment = line.split("  #", 1)[1].strip() if "  #" in line else ""
    return result, out, comment
