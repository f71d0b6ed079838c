"""The verbs of `%emq` and `emq`, one module per family, imported here in the order
`%emq help` lists them: the session's, a queue's, a job's, triage, export, import and
move, health, the monitor, the live views, the audit trail. Each verb is declared once, with
`registry.verb` on its handler (how to add one: the top of `registry.py`)."""

# isort: off
# the order of help: each module declares its verbs as it is imported
from . import session, queue, job, triage, transfer, health, monitor, panels, trail

# isort: on
from .session import Session, confirm, execute, parse

__all__ = [
    "Session",
    "confirm",
    "execute",
    "parse",
    "session",
    "queue",
    "job",
    "triage",
    "transfer",
    "health",
    "monitor",
    "panels",
    "trail",
]
