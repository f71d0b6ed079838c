"""The Lua scripts: one per transition, read from `lua/`, their includes resolved.

A script opens with its KEYS/ARGV/returns block and may pull shared fragments
with a line `--@include NAME` (from `lua/includes/NAME.lua`), each at most once.
The same bodies, wrapped as functions, make the server-side library that the
function executor loads with FUNCTION LOAD.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import NamedTuple

LIBRARY = "emq_notebook"
_INCLUDE = re.compile(r"^--@include (\w+)\s*$", re.M)
_INCLUDE_MARK = "--@include"
_READONLY = "--@readonly"


def lua_dir() -> Path:
    """Where the scripts are: inside the installed wheel, else the checkout's `lua/`."""
    shipped = Path(str(resources.files("emq_notebook"))) / "lua"
    if shipped.is_dir():
        return shipped
    return Path(__file__).resolve().parent.parent / "lua"


def names() -> list[str]:
    """Every transition script, by name (file stem)."""
    return sorted(p.stem for p in lua_dir().glob("*.lua"))


def _own(name: str) -> str:
    """Script `name`'s own file, its include lines as written."""
    return (lua_dir() / f"{name}.lua").read_text()


# the include rendered from Python (`constants`), not read from a file
CONSTANTS = "constants"


@functools.cache
def constants() -> str:
    """The `constants` include: the values a script shares with Python, rendered from
    their one home (`checks.MAX_WHOLE`, `keyspace.MAX_SERVER_ID`, `ROW_WHOLES`,
    `WALK_CHUNK`, `LANES_A_CALL`, `defaults.ID_WORK`), so the two never drift."""
    from .checks import MAX_WHOLE
    from .defaults import ID_WORK
    from .keyspace import LANES_A_CALL, MAX_SERVER_ID, ROW_WHOLES, WALK_CHUNK

    wholes = ", ".join(f"{{{_lua_text(name)}, {default}}}" for name, default in ROW_WHOLES)
    return (
        "-- constants: rendered from Python (emq_notebook/scripts.py `constants`)\n"
        f"local MAX_WHOLE = {MAX_WHOLE}\n"
        f"local MAX_ID = {MAX_SERVER_ID}\n"
        f"local ID_WORK = {ID_WORK}\n"
        f"local WALK_CHUNK = {WALK_CHUNK}\n"
        f"local LANES_A_CALL = {LANES_A_CALL}\n"
        f"local ROW_WHOLES = {{{wholes}}}\n"
    )


def _fragment_text(inc: str) -> str:
    if inc == CONSTANTS:
        return constants()
    return (lua_dir() / "includes" / f"{inc}.lua").read_text()


def _splicer() -> Callable[[re.Match], str]:
    """A replacement for include lines: the fragment, its own includes spliced in,
    each fragment once per splicer."""
    seen: set[str] = set()

    def splice(match: re.Match) -> str:
        inc = match.group(1)
        if inc in seen:
            return ""
        seen.add(inc)
        return _INCLUDE.sub(splice, _fragment_text(inc))

    return splice


def fragment(name: str) -> str:
    """Include `name` with its own includes spliced in, as a script gets it (a test
    runs a fragment alone)."""
    return _INCLUDE.sub(_splicer(), f"--@include {name}\n")


@functools.cache
def source(name: str) -> str:
    """The script `name` with its includes spliced in, ready for EVAL."""
    return _INCLUDE.sub(_splicer(), _own(name))


def _included(name: str) -> str:
    """Only the includes of script `name`, spliced as `source` splices them."""
    splice = _splicer()
    return "".join(splice(m) for m in _INCLUDE.finditer(_own(name)))


def header(name: str) -> list[str]:
    """The opening comment block of script `name` (its own file, before any include)."""
    lines = []
    for line in (lua_dir() / f"{name}.lua").read_text().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.strip())
    return lines


class Contract(NamedTuple):
    """What a script's header says: what it does, its KEYS, its ARGV, what it returns."""

    summary: str
    keys: str
    argv: str
    returns: str


def contract(name: str) -> Contract:
    """The header of script `name` read as its contract. The header opens with
    `-- @name -- what it does`, then `KEYS[...]`, `ARGV...` (none for a script that
    takes no argument) and `returns ...`, before its first `--@include`."""
    lines = []
    for line in header(name):
        if line.startswith(_INCLUDE_MARK):
            break
        if line != _READONLY:
            lines.append(line[2:].strip())
    text = " ".join(line for line in lines if line)
    opening = re.match(rf"@{name} -- (.*)\Z", text)
    if not opening or "KEYS" not in text or "returns" not in text:
        raise ValueError(f"lua/{name}.lua: its header is not `-- @{name} -- ...` with KEYS and returns")
    rest = opening.group(1)
    k, r = rest.index("KEYS"), rest.index("returns")
    a = rest.find("ARGV", k)
    a = a if 0 <= a < r else r
    return Contract(rest[:k].strip(), rest[k:a].strip(" ;"), rest[a:r].strip(" ;"), rest[r:].strip())


def markdown() -> str:
    """The table of every script, from their headers: lua/README.md holds it (a test
    keeps them equal; `python -c "from emq_notebook import scripts; print(scripts.markdown())"`)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|") or "none"

    rows = ["| script | does | KEYS | ARGV | returns |", "|---|---|---|---|---|"]
    for name in names():
        c = contract(name)
        rows.append(f"| `{name}` | {cell(c.summary)} | {cell(c.keys)} | {cell(c.argv)} | {cell(c.returns)} |")
    return "\n".join(rows) + "\n"


@functools.cache
def read_only(name: str) -> bool:
    """True when script `name` declares `--@readonly` in its header: it writes nothing."""
    return _READONLY in header(name)


# the prefix of a transition's audited twin (`audited`): the same body, its audit entry beside
# it. Its number is the twin's shape (what it takes and answers, `includes/audited.lua`):
# a client of another shape sharing the server finds no function of its name in the
# library this one loads ("Function not found": it loads its own and retries), never a
# function answering in a shape it would misread after the write went
AUDITED = "audited4_"


def audit_values() -> int:
    """How many values an audited twin's call carries last in ARGV: verb, count, ids,
    args, keep, gone, then the identity's (`keyspace.AUDIT_WHO`)."""
    from .keyspace import AUDIT_WHO

    return 6 + len(AUDIT_WHO)


def _audit_tables() -> str:
    """What `includes/audited.lua` reads, composed from the toolkit's one home of each:
    `AUDIT_VALUES` (`audit_values`), `emq_refusals()`, the refusals an error reply
    names ({prefix, reason} pairs, longest first: `errors.refusal_table`; a function,
    built only for an error reply), and `emq_identity(v)`, the identity's fields as
    XADD takes them: each name of `keyspace.AUDIT_WHO` and its value, `v[7]` on."""
    from .errors import refusal_table
    from .keyspace import AUDIT_WHO

    pairs = ", ".join(f"{{{_lua_text(p)}, {_lua_text(r)}}}" for p, r in refusal_table())
    fields = ", ".join(f"{_lua_text(n)}, v[{7 + i}]" for i, n in enumerate(AUDIT_WHO))
    return (
        f"local AUDIT_VALUES = {audit_values()}\n"
        f"local function emq_refusals() return {{{pairs}}} end\n"
        f"local function emq_identity(v) return {fields} end\n"
    )


def _lua_text(text: str) -> str:
    if not re.fullmatch(r"[\w ]*", text):
        raise ValueError(f"not a plain word or phrase: {text!r}")
    return f"'{text}'"


def _auditing() -> str:
    """What an audited twin needs ahead of its body: its tables and `emq_audited`."""
    return _audit_tables() + _INCLUDE.sub(_splicer(), (lua_dir() / "includes" / "audited.lua").read_text())


@functools.cache
def audited(name: str) -> str:
    """The audited twin of writing script `name`, ready for EVAL: its includes, then
    its own text unchanged as a function, run by `emq_audited` (`includes/audited.lua`),
    which writes the audit entry beside it in the same call. The call carries the audit
    stream as one more KEY and the entry's `audit_values()` values as ARGV, last."""
    if read_only(name):
        raise ValueError(f"{name} writes nothing: it has no audited twin")
    return (
        f"{_included(name)}\n{_auditing()}\n"
        f"local function body(KEYS, ARGV)\n{_INCLUDE.sub('', _own(name))}\nend\n"
        "return emq_audited(body, KEYS, ARGV)\n"
    )


def _function(name: str) -> str:
    """Script `name` as a library function `emq_<name>`, and a writing script's audited
    twin `emq_audited4_<name>` (the same body run by `emq_audited`). Its includes
    (definitions only: functions and constant tables, no KEYS, ARGV or redis.call at
    their top level) run once, when the library loads, in a block of their own; the
    callback runs the script's own text on each call. As EVAL, the same text runs
    whole on every call."""
    body = _INCLUDE.sub("", _own(name))
    head = f"do\n{_included(name)}\nlocal function body(KEYS, ARGV)\n{body}\nend\n"
    if read_only(name):
        flags = "flags={'no-writes'}"
        return head + f"redis.register_function{{function_name='emq_{name}', callback=body, {flags}}}\nend\n"
    return (
        head + f"redis.register_function{{function_name='emq_{name}', callback=body}}\n"
        f"redis.register_function{{function_name='emq_{AUDITED}{name}', "
        "callback=function(KEYS, ARGV) return emq_audited(body, KEYS, ARGV) end}\nend\n"
    )


@functools.cache
def library() -> tuple[str, str]:
    """(version, source) of the function library: every script as `emq_<name>`.

    The version is a digest of the bodies, so a changed script upgrades the
    library on the server the next time a connection uses it.
    """
    bodies = [_function(n) for n in names()]
    version = hashlib.sha1((_auditing() + "".join(bodies)).encode()).hexdigest()[:12]
    head = (
        f"#!lua name={LIBRARY}\n"
        "redis.register_function{function_name='emq_version', "
        f"callback=function() return '{version}' end, flags={{'no-writes'}}}}\n"
    )
    return version, head + _auditing() + "".join(bodies)
