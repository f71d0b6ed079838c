"""The panels: ipywidgets over the same verbs the magics call (no transition
logic lives here: a widget calls a verb, a verb never knows about widgets)."""

from .dead_letters import DeadLetterPanel
from .events_view import EventsView
from .job_panel import JobPanel
from .queue_panel import QueuePanel

__all__ = ["QueuePanel", "JobPanel", "DeadLetterPanel", "EventsView"]
