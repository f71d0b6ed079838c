"""The verb catalogue: each Python operator verb's contract, declared on the function
itself, and the registry of every function a `%emq` verb runs::

    @contract("pause", writes=True)
    @audit.audited("pause", single=True)
    def pause(conn, q):
        '''Close the claim gate.

        script: @pause
        precondition: none (idempotent)
        writes: HSET emq:{q}:meta paused 1; publishes `paused`
        replies: None — paused field set
        native: none, a script only
        '''

The block that ends the docstring, from its `script:` line, is the contract (a long
value goes on over more indented lines); given as `contract`'s keywords instead, it is
appended to the docstring. The function is returned as it is. From these come the
operator console's text (`describe`), the verbs table (`markdown()`, in
docs/wire-contract.md; `python -m emq_notebook.catalogue` prints it), each `%emq`
verb's entries (`registry.Verb.entries`) and `OPERATIONS`, among them the functions
that can change a queue (`writers()`). The catalogue declares and records nothing: a
writer is recorded by `@audit.audited` under its contract (a test holds that every
writer is).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Entry:
    name: str  # the Python verb, module.function
    verb: str  # the `%emq` verb that runs it
    script: str  # the Lua transition it runs
    precondition: str
    changes: str  # what it writes
    replies: str
    native: str


@dataclass(frozen=True)
class Operation:
    """A function a `%emq` verb runs. `writes`: it can change a queue (a bulk call
    given `dry_run=True` reads only, as its docstring says)."""

    name: str  # module.function
    verb: str
    writes: bool
    function: Callable[..., Any]  # as declared


# module.function -> its entry, in declaration order
CATALOGUE: dict[str, Entry] = {}
# module.function -> every function declared with `contract`, in declaration order
OPERATIONS: dict[str, Operation] = {}


def describe(name: str) -> str:
    """The catalogue entry as the console (and a docstring) shows it."""
    v = CATALOGUE[name]
    return (
        f"{v.name} · {v.script}\n"
        f"precondition: {v.precondition}\n"
        f"writes: {v.changes}\n"
        f"replies: {v.replies}\n"
        f"native: {v.native}"
    )


# a contract block's labels, as `describe` shows them -> the Entry field each fills
_LABELS = {"script": "script", "precondition": "precondition", "writes": "changes"}
_LABELS |= {"replies": "replies", "native": "native"}


def _block(doc: str | None) -> dict[str, str]:
    """The contract block that ends `doc`, from its `script:` line: {field: value}."""
    lines = inspect.cleandoc(doc or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("script: ")), len(lines))
    fields: dict[str, str] = {}
    for line in lines[start:]:
        label, colon, value = line.partition(": ")
        if colon and label in _LABELS:
            field = _LABELS[label]
            fields[field] = value.strip()
        else:  # a value going on
            fields[field] += " " + line.strip()
    return fields


def contract(verb: str, *, writes: bool = False) -> Callable[[F], F]:
    """Declare the decorated function as run by the `%emq` verb `verb` (`writes`: it
    can change a queue); with a contract block ending its docstring (from a `script:`
    line), its catalogue entry too. Refuses (`ValueError`) a name declared twice."""

    def declare(fn: F) -> F:
        name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
        if name in OPERATIONS:
            raise ValueError(f"{name} is declared twice")
        block = _block(fn.__doc__)
        if block:
            defaults = {"precondition": "", "changes": "nothing (a read)", "replies": "", "native": ""}
            CATALOGUE[name] = Entry(name, verb, **(defaults | block))
        OPERATIONS[name] = Operation(name, verb, writes, fn)
        return fn

    return declare


def writers() -> list[Operation]:
    """Every function a verb runs that can change a queue, in declaration order."""
    return [op for op in OPERATIONS.values() if op.writes]


def markdown() -> str:
    """The README's verbs table: by module, each module's verbs in declaration order
    (not in the order the modules happen to be imported)."""
    rows = ["| verb | script | precondition | replies | native |", "|---|---|---|---|---|"]
    for v in sorted(CATALOGUE.values(), key=lambda v: v.name.partition(".")[0]):
        rows.append(f"| `{v.name}` | `{v.script}` | {v.precondition} | {v.replies} | {v.native} |")
    return "\n".join(rows)


if __name__ == "__main__":
    # run as a script this module is `__main__`, a second copy with an empty catalogue:
    # print the package's own, which importing the package fills
    from emq_notebook import catalogue as package_catalogue

    print(package_catalogue.markdown())
