"""The verb registry: every `%emq` / `emq` verb is declared here once.

How to add a verb
-----------------
Write its handler (a function of the session and the parsed namespace) and declare
it with `@verb` just above, in the module of `emq_notebook/verbs/` beside the verbs
like it (or in a module of your own, imported in `verbs/__init__.py`)::

    @verb("errors", "the dead letters grouped by error signature",
          arg("queue"), opt("--state", choices=["dead", "schedule"], default="dead"))
    def _errors(s: Session, ns: Namespace) -> Any:
        return triage.errors(s.conn, ns.queue, ns.state)

That one declaration gives the verb everything else:

- its argparse grammar, its line in `%emq help`, and `%emq errors -h` (`grammar.py`);
- the shell command `emq errors ...` (`cli.py`) and `%emq` / `%%emq` (`magics.py`);
- tab completion of its options and choices, and of queue names and job ids for
  arguments named `queue` and `id` (`completion.py`);
- its catalogue entries: those of the Python verbs declared with
  `@catalogue.contract(name, ...)` (their Lua script, precondition, writes,
  replies, native line), each a row of the README's verbs table;
- `writes=True` for a verb that changes the queue: refused with `ReadOnly` on a
  read-only connection before anything is read or sent; it takes `--reason TEXT`
  (the reason its audit entry gives; the entry itself is written by the Python verb
  it runs, declared `@catalogue.contract(name, writes=True)` and `@audit.audited`).  A verb that destroys or
  moves many jobs at once also calls `verbs.confirm(...)` with the count before its
  first write (the one confirmation gate, threshold `confirm_above`).

Arguments: `arg(name)` is a positional word; `arg(name, literal=True)` is data taken
as written (a JSON payload: `-h` is a payload there, not help); `arg(name,
free=True)` is free text, every remaining word taken literally (the last positional
only); `arg(name, many=True)` is a list of words (the last positional only), each read
as any word is (`-h` asks for help: `check [QUEUE ...]`).
`opt("--name", ...)` is an option; its keywords are argparse's
(`type`, `choices`, `default`, `action="store_true"`, `help`, `metavar`).
`tests/test_registry.py` fails for a verb without a handler, help text, or (with a
catalogue entry) its README row.
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
