"""Documentation executed as written: a section's lines typed one by one into the
session's IPython shell, each line's answer read from its trailing comment."""

from __future__ import annotations

import re
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


# a statement's continuation: an indented line, or the next clause of a compound one
_GOES_ON = re.compile(r"\s|(except|else|elif|finally)\b")


def statements(block: str) -> list[str]:
    """The statements of a code block, as a person types them one after the other: a
    line, or a compound statement with its indented lines and clauses (`try:` ...
    `except ...:` ...); blank lines dropped."""
    said: list[str] = []
    for line in block.strip().splitlines():
        if not line.strip():
            continue
        if said and _GOES_ON.match(line):
            said[-1] += "\n" + line
        else:
            said.append(line)
    return said


# a comment that reads like a value is the repr of the value the statement answers
VALUE = re.compile(r"['\"<\[{(]|-?\d|True\b|False\b|None\b")


def answered(result: Any, out: str, comment: str) -> bool | None:
    """Whether a statement answered what its comment says: a comment that reads like a
    value (`'j_1'`, `1`, `True`) is the repr of the value returned; one holding `...`
    is a printed line, each part between them printed in order. None for a comment
    that only explains (nothing to check)."""
    if VALUE.match(comment):
        return repr(result.result) == comment
    if "..." in comment:
        return re.search(".*?".join(map(re.escape, comment.split("..."))), out) is not None
    return None
