"""The verb catalogue: what each Python operator verb requires, writes, answers and
how its native form reads.

The entries are declared with the `%emq` verbs that run them (`registry.verb(...,
catalogue=Entry(...))` in `verbs/`), and this module keeps them: the operator
console shows them, the Python verbs' docstrings end with them (`document`), and the
README's verbs table is `markdown()` (a test keeps them equal).
`python -m emq_notebook.catalogue` prints the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Entry:
    name: str  # the Python verb, module.function
    script: str  # the Lua transition it runs
    precondition: str
    writes: str
    replies: str
    native: str


# module.function -> its entry, in declaration order (the README's order)
CATALOGUE: dict[str, Entry] = {}
# Python verbs decorated with `document` whose entry is not declared yet
_WAITING: dict[str, Callable[..., Any]] = {}


def describe(name: str) -> str:
    """The catalogue entry as the console (and a docstring) shows it."""
    v = CATALOGUE[name]
    return (
        f"{v.name} · {v.script}\n"
        f"precondition: {v.precondition}\n"
        f"writes: {v.writes}\n"
        f"replies: {v.replies}\n"
        f"native: {v.native}"
    )


def _append_doc(fn: Callable[..., Any], name: str) -> None:
    fn.__doc__ = (
        (fn.__doc__ or "").rstrip()
        + "\n\n"
        + "\n".join("    " + line for line in describe(name).splitlines()[1:])
        + "\n"
    )


def add(entry: Entry) -> None:
    """Keep `entry` (once per Python verb); a verb already `document`ed gets its block."""
    if entry.name in CATALOGUE:
        if CATALOGUE[entry.name] != entry:
            raise ValueError(f"two catalogue entries for {entry.name}")
        return
    CATALOGUE[entry.name] = entry
    fn = _WAITING.pop(entry.name, None)
    if fn is not None:
        _append_doc(fn, entry.name)


def document(fn: F) -> F:
    """Append the catalogue entry to a verb's docstring (a decorator). The Python verbs
    are imported before the `%emq` verbs that declare their entries, so the block is
    appended when the entry arrives (importing the package declares them all)."""
    name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
    if name in CATALOGUE:
        _append_doc(fn, name)
    else:
        _WAITING[name] = fn
    return fn


def markdown() -> str:
    """The README's verbs table."""
    rows = ["| verb | script | precondition | replies | native |", "|---|---|---|---|---|"]
    for v in CATALOGUE.values():
        rows.append(f"| `{v.name}` | `{v.script}` | {v.precondition} | {v.replies} | {v.native} |")
    return "\n".join(rows)


if __name__ == "__main__":
    # run as a script this module is `__main__`, a second copy with an empty catalogue:
    # print the package's own, which importing the package fills
    from emq_notebook import catalogue as package_catalogue

    print(package_catalogue.markdown())
