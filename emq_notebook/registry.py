"""The verb registry: every `%emq` / `emq` verb is declared here once.

To add a verb, write its handler (a function of the session and the parsed namespace)
and declare it with `@verb` just above, in the module of `emq_notebook/verbs/` beside
the verbs like it::

    @verb("errors", "the dead letters grouped by error signature",
          arg("queue"), opt("--state", choices=["dead", "schedule"], default="dead"))
    def _errors(s: Session, ns: Namespace) -> Any:
        return triage.errors(s.conn, ns.queue, ns.state)

That one declaration gives the verb its argparse grammar, its help (`grammar.py`), the
shell command (`cli.py`), `%emq` / `%%emq` (`magics.py`), tab completion (queue names
and job ids for arguments named `queue` and `id`: `completion.py`) and the catalogue
entries of the Python verbs it runs (`@catalogue.contract`: the README's verbs table).
`writes=True`: refused with `ReadOnly` on a read-only connection before any I/O, and
takes `--reason TEXT` for its audit entry (written by the Python verb, `@audit.audited`).
A verb that destroys or moves many jobs calls `verbs.confirm(...)` with the count
before its first write.

Arguments: `arg(name)` is a positional word; `literal=True` data taken as written (a
JSON payload: `-h` is a payload there); `free=True` every remaining word taken
literally, `many=True` a list of words (each the last positional only).
`opt("--name", ...)` is an option, with argparse's keywords. `tests/test_registry.py`
fails for a verb without a handler, help text, or (with a catalogue entry) its README row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .catalogue import CATALOGUE, Entry

Handler = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Arg:
    """One argument of a verb: a positional word or an `--option`."""

    names: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict, hash=False)
    literal: bool = False  # data, taken as written (`-h` included)
    free: bool = False  # free text: this word and every one after it
    many: bool = False  # a list of words: this word and every one after it, none taken as data

    @property
    def rest(self) -> bool:
        """True for the positional that takes every word left (free text, or a list)."""
        return self.free or self.many

    @property
    def is_option(self) -> bool:
        return self.names[0].startswith("-")

    @property
    def dest(self) -> str:
        return self.names[0].lstrip("-").replace("-", "_")

    @property
    def takes_value(self) -> bool:
        return self.is_option and self.kwargs.get("action") not in ("store_true", "store_false")


def arg(name: str, *, literal: bool = False, free: bool = False, many: bool = False, **kwargs: Any) -> Arg:
    """A positional argument; `literal` for data, `free` for free text, `many` for a
    list of words (free text or a list: the last one)."""
    if free:
        kwargs.setdefault("nargs", "+")
    if many:
        kwargs.setdefault("nargs", "*")
    return Arg((name,), kwargs, literal=literal or free, free=free, many=many)


def opt(*names: str, **kwargs: Any) -> Arg:
    """An option: `opt("--budget", type=..., default=..., help=...)`."""
    return Arg(tuple(names), kwargs)


@dataclass(frozen=True)
class Verb:
    """A declared verb: what `help`, the parser, the shell and completion read."""

    name: str
    summary: str
    args: tuple[Arg, ...]
    handler: Handler
    writes: bool = False
    needs_server: bool = True

    @property
    def entries(self) -> tuple[Entry, ...]:
        """The catalogue entries of the Python verbs it runs (`catalogue.contract`)."""
        return tuple(e for e in CATALOGUE.values() if e.verb == self.name)

    @property
    def positionals(self) -> list[Arg]:
        return [a for a in self.args if not a.is_option]

    @property
    def options(self) -> dict[str, Arg]:
        """Every option string (`--budget`) -> its argument."""
        return {n: a for a in self.args if a.is_option for n in a.names}


# every writing verb's: the reason its audit entry gives (before the session's)
REASON = opt(
    "--reason", metavar="TEXT", help="why: this command's audit entry says it (%%emq reason: the session's)"
)

# name -> Verb, in declaration order (the order of `help`)
VERBS: dict[str, Verb] = {}


def verb(
    name: str,
    summary: str,
    *args: Arg,
    writes: bool = False,
    needs_server: bool = True,
) -> Callable[[Handler], Handler]:
    """Declare the verb `name` with the decorated function as its handler."""

    def declare(handler: Handler) -> Handler:
        if name in VERBS:
            raise ValueError(f"verb {name!r} is declared twice")
        free = [a for a in args if a.rest]
        if free and (len(free) > 1 or free[0] is not [a for a in args if not a.is_option][-1]):
            raise ValueError(f"verb {name!r}: free text or a list is the last positional, and only one")
        given = (*args, REASON) if writes else tuple(args)
        VERBS[name] = Verb(name, summary, given, handler, writes, needs_server)
        return handler

    return declare


def lookup(name: str) -> Verb | None:
    return VERBS.get(name)
