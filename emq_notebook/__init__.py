"""emq_notebook -- the operator plane for EchoMQ queues on Valkey, from Jupyter.

    import emq_notebook as emq
    conn = emq.connect()                    # the embedded default
    emq.jobs.enqueue(conn, "mail", '{"to": "a@b"}')
    emq.admin.pause(conn, "mail")

In IPython: `%load_ext emq_notebook`, then `%emq help`.
"""

from . import admin, demo, footprint, frames, jobs, lanes, repeat, widgets
from .connector import Connection, connect
from .errors import (ActiveJobs, BadInput, BadRow, EMQError, Gone, Halted, InvalidName, Locked,
                     NativeUnavailable, NotActive, NotDead, NotOwner, NotPaused, NotScheduled,
                     ReadOnly, Refused, UsageProblem, WireError)
from .worker import Worker

__version__ = "0.1.0"

__all__ = ["connect", "Connection", "admin", "jobs", "lanes", "repeat", "Worker",
           "EMQError", "Refused", "Gone", "Locked", "NotDead", "NotPaused", "ActiveJobs",
           "NotActive", "InvalidName", "UsageProblem", "BadInput", "WireError",
           "NativeUnavailable", "NotOwner", "NotScheduled", "BadRow", "ReadOnly", "Halted",
           "load_ipython_extension", "current"]


def current() -> Connection:
    """The connection `%emq` uses (opened on first use), for Python cells beside the magics."""
    from .magics import SESSION

    return SESSION.conn


def load_ipython_extension(ipython):
    """`%load_ext emq_notebook`: register `%emq` and `%%emq`."""
    from .magics import register

    register(ipython)
