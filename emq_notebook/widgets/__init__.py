"""The panels: ipywidgets over the same verbs the magics call (no transition
logic lives here: a widget calls a verb, a verb never knows about widgets)."""

from .audit_view import AuditView
from .claim_gate import ClaimGate
from .dashboard import Dashboard
from .dead_letters import DeadLetterPanel
from .events_view import EventsView
from .health_view import HealthView
from .job_panel import JobPanel
from .metrics_view import MetricsView
from .operator_console import OperatorConsole
from .queue_panel import QueuePanel

__all__ = [
    "Dashboard",
    "QueuePanel",
    "JobPanel",
    "DeadLetterPanel",
    "EventsView",
    "ClaimGate",
    "OperatorConsole",
]
__all__ += ["MetricsView", "HealthView", "AuditView"]
