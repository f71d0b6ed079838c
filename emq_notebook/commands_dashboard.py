"""The `%emq dashboard` verb: every queue at a glance, one click to a queue's tabs.

It reads only (the counts of every queue); its buttons write through the verbs
they call, each refused on a read-only connection. A shell session has no widget
to show, so `emq dashboard` is a usage error there.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from .registry import arg, verb


@verb(
    "dashboard",
    "every queue at a glance; click one to open its tabs",
    arg("queue", nargs="?", help="open this queue's tabs at once"),
)
def _dashboard(s: Any, ns: Namespace) -> Any:
    from .widgets import Dashboard

    settings = s.settings
    return s.widget(
        lambda: Dashboard(
            s.conn, refresh_every=settings.refresh_s, queue=ns.queue, confirm_above=settings.confirm_above
        )
    )
