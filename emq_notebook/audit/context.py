"""Where a record comes from: the surface a call was typed or clicked at (`surface`),
the reason given for it (`because`, `conn.reason`), and the notebook this process runs."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..decoding import clipped
from .entry import MAX_TEXT, _option

if TYPE_CHECKING:
    from ..connector import Connection

SURFACES = ("magic", "panel", "runbook", "shell", "python")

# -- the surface, the reason, the notebook --------------------------------------------------


@dataclass
class Said:
    """What the records written inside one surface block came to: the entries written
    (`(queue, stream id)`) and the `audit_failed` notes of those that were not."""

    surface: str
    entries: list[tuple[str, str]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def suffix(self) -> str:
        """` · audit_failed: ...` to end the verb's line with, or "" when all were written."""
        return "".join(f" · {note}" for note in self.failed)


_surface: contextvars.ContextVar[Said | None] = contextvars.ContextVar("emq_audit_surface", default=None)
_reason: contextvars.ContextVar[str | None] = contextvars.ContextVar("emq_audit_reason", default=None)

# process-wide: a runbook's kernel is a runbook from its first cell on, whatever context
# IPython runs each cell in
_process: dict[str, str | None] = {"surface": "python", "notebook": None}


def _check_surface(name: str) -> str:
    if name not in SURFACES:
        raise ValueError(f"surface is one of {', '.join(SURFACES)}, not {name!r}")
    return name


@contextlib.contextmanager
def surface(name: str) -> Iterator[Said]:
    """Inside the block, records say they came from `name` (`magic`, `panel`, `runbook`,
    `shell`, `python`); yields a `Said` whose `suffix()` the surface prints after the
    verb's result. Nested blocks: the innermost names the surface."""
    said = Said(_check_surface(name))
    token = _surface.set(said)
    try:
        yield said
    finally:
        _surface.reset(token)


def set_default_surface(name: str) -> None:
    """The surface of records made outside any `surface` block in this process
    (`python` unless set; a runbook's kernel sets `runbook`)."""
    _process["surface"] = _check_surface(name)


def typed(name: str) -> str:
    """The surface of a command typed at `name` (`magic`): `runbook` in a runbook's
    kernel, whose cells are the runbook's steps."""
    _check_surface(name)
    return "runbook" if name == "magic" and _process["surface"] == "runbook" else name


def in_surface() -> bool:
    """True inside a `surface` block: an operator typed or clicked the call (the
    queue-underneath verbs are recorded only so: `UNDERNEATH`)."""
    return _surface.get() is not None


def current_surface() -> str:
    said = _surface.get()
    return said.surface if said is not None else str(_process["surface"])


@contextlib.contextmanager
def because(text: str | None) -> Iterator[None]:
    """The reason of the calls inside the block (`--reason TEXT` of one command); it
    goes before the session's (`conn.reason`). None or "" leaves the session's."""
    token = _reason.set(text or None)
    try:
        yield
    finally:
        _reason.reset(token)


def reason_of(conn: Connection) -> str:
    """The reason a record carries: the call's (`because`), else the session's
    (`conn.reason`), else "". Whole: the entry holds it scrubbed, then `clipped`."""
    said = _reason.get() or getattr(conn, "reason", None) or ""
    return str(said)


def set_notebook(path: str | None) -> None:
    """Name the notebook this process runs (a runbook's path and parameters); None
    goes back to what IPython knows (`notebook`)."""
    _process["notebook"] = path or None


def runbook(name: str, params: Mapping[str, Any]) -> None:
    """This kernel runs runbook `name` with `params`: its records say surface `runbook`
    and notebook `<name>.ipynb {"QUEUE": ..., "APPLY": ..., "REASON": ...}` (the
    parameters papermill gave, secrets scrubbed)."""
    set_default_surface("runbook")
    shown = json.dumps({k: _option(k, v, ()) for k, v in params.items()}, sort_keys=True, default=str)
    set_notebook(f"{name}.ipynb {shown}")


def notebook() -> str:
    """The notebook this process runs, when known, as its entries hold it (`clipped` to
    `MAX_TEXT`): the one named (`set_notebook`, `runbook`), else VS Code's
    `__vsc_ipynb_file__`, ipykernel's `__session__` (the path Jupyter Server gives the
    kernel), else `JPY_SESSION_NAME`; "" in a plain process."""
    return clipped(_notebook(), MAX_TEXT)


def _notebook() -> str:
    named = _process["notebook"]
    if named:
        return named
    shell = _shell()
    if shell is not None:
        for variable in ("__vsc_ipynb_file__", "__session__"):
            path = shell.user_ns.get(variable)
            if isinstance(path, str) and path:
                return path
    return _environ("JPY_SESSION_NAME")


# the process's environment as os.environ holds it (encoded names and values): a record
# reads two names on every write, and `os.environ.get` of an unset name raises and
# catches a KeyError inside it (bench/README.md: Python's bounds)
_raw_environ: dict[Any, Any] | None = getattr(os.environ, "_data", None)
_encoded = functools.cache(os.environ.encodekey)


def _environ(name: str) -> str:
    """`os.environ.get(name, "")`, read without an exception when unset."""
    if _raw_environ is None:
        return os.environ.get(name, "")
    raw = _raw_environ.get(_encoded(name))
    return "" if raw is None else os.environ.decodevalue(raw)


def _shell() -> Any:
    """The IPython shell this process runs, or None: what `get_ipython()` answers,
    asked of the class (a record asks on every write, and `get_ipython` imports on
    each call); IPython is never imported just to ask."""
    module = sys.modules.get("IPython.core.interactiveshell")
    if module is None:
        return None
    shell = module.InteractiveShell
    return shell.instance() if shell.initialized() else None
