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
from importlib import resources
from pathlib import Path

LIBRARY = "emq_notebook"
_INCLUDE = re.compile(r"^--@include (\w+)\s*$", re.M)
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


@functools.cache
def source(name: str) -> str:
    """The script `name` with its includes spliced in, ready for EVAL."""
    seen: set[str] = set()

    def splice(match: re.Match) -> str:
        inc = match.group(1)
        if inc in seen:
            return ""
        seen.add(inc)
        return _INCLUDE.sub(splice, (lua_dir() / "includes" / f"{inc}.lua").read_text())

    return _INCLUDE.sub(splice, (lua_dir() / f"{name}.lua").read_text())


def header(name: str) -> list[str]:
    """The opening comment block of script `name` (its own file, before any include)."""
    lines = []
    for line in (lua_dir() / f"{name}.lua").read_text().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.strip())
    return lines


@functools.cache
def read_only(name: str) -> bool:
    """True when script `name` declares `--@readonly` in its header: it writes nothing."""
    return _READONLY in header(name)


def _function(name: str) -> str:
    flags = ", flags={'no-writes'}" if read_only(name) else ""
    return (f"redis.register_function{{function_name='emq_{name}', callback=function(KEYS, ARGV)\n"
            f"{source(name)}\nend{flags}}}\n")


@functools.cache
def library() -> tuple[str, str]:
    """(version, source) of the function library: every script as `emq_<name>`.

    The version is a digest of the bodies, so a changed script upgrades the
    library on the server the next time a connection uses it.
    """
    bodies = [_function(n) for n in names()]
    version = hashlib.sha1("".join(bodies).encode()).hexdigest()[:12]
    head = (
        f"#!lua name={LIBRARY}\n"
        "redis.register_function{function_name='emq_version', "
        f"callback=function() return '{version}' end, flags={{'no-writes'}}}}\n"
    )
    return version, head + "".join(bodies)
