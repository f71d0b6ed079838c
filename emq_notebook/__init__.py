"""emq_notebook -- the operator plane for EchoMQ queues on Valkey, from Jupyter.

    import emq_notebook as emq
    conn = emq.connect()                    # the embedded default
    emq.jobs.enqueue(conn, "mail", '{"to": "a@b"}')
    emq.admin.pause(conn, "mail")

In IPython: `%load_ext emq_notebook`, then `%emq help`.
"""

from typing import Any

# `verbs` declares every `%emq` verb (the registry the grammar reads)
from . import admin, footprint, frames, jobs, lanes, repeat, triage, verbs
from .connector import Connection, connect
from .errors import (
    ActiveJobs,
    BadInput,
    BadRow,
    EMQError,
    Gone,
    Halted,
    InvalidName,
    Locked,
    NativeUnavailable,
    NotActive,
    NotDead,
    NotOwner,
    NotPaused,
    NotScheduled,
    OutcomeNotReached,
    PreconditionFailed,
    QueueInUse,
    ReadOnly,
    Refused,
    UnknownQueue,
    UsageProblem,
    WireError,
)
from .worker import Worker

__version__ = "0.1.0"

__all__ = [
    "connect",
    "Connection",
    "admin",
    "jobs",
    "lanes",
    "repeat",
    "triage",
    "Worker",
    "EMQError",
    "Refused",
    "Gone",
    "Locked",
    "NotDead",
    "NotPaused",
    "ActiveJobs",
    "NotActive",
    "InvalidName",
    "UsageProblem",
    "BadInput",
    "WireError",
    "NativeUnavailable",
    "NotOwner",
    "NotScheduled",
    "BadRow",
    "ReadOnly",
    "Halted",
    "QueueInUse",
    "PreconditionFailed",
    "OutcomeNotReached",
    "UnknownQueue",
    "runbook",
    "load_ipython_extension",
    "current",
]


# imported on first use (`emq.widgets`), so a worker process never pays for the
# notebook (ipywidgets, IPython, matplotlib) nor the exporter (prometheus_client);
# `demo` too, which imported with the package would run twice over under
# `python -m emq_notebook.demo` (runpy's warning)
_ON_FIRST_USE = ("widgets", "magics", "runbook", "plots", "demo", "monitor")


def __getattr__(name: str) -> Any:
    if name in _ON_FIRST_USE:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_ON_FIRST_USE])


def current(name: str | None = None) -> Connection:
    """The connection `%emq` uses (opened on first use), or the one `%emq connect
    --name NAME` kept, for Python cells beside the magics. After a `%emq connect` that
    failed with no connection current, `UsageProblem` (as every `%emq` verb refuses)
    until a `%emq connect` or `%emq use` succeeds."""
    from .magics import SESSION

    return SESSION.get(name)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext emq_notebook`: register `%emq`, `%%emq`, `%config EMQMagics` and completion."""
    from .magics import register

    register(ipython)
