"""What the panels' tests share: a panel's display bundle as a saved notebook keeps it,
the panel threads running, and text a comm could not send to the browser."""

import threading

VIEW = "application/vnd.jupyter.widget-view+json"


def shown(ip, panel):
    data, _ = ip.display_formatter.format(panel)
    return data


def emq_threads():
    return {t for t in threading.enumerate() if t.name.startswith("emq-")}


def unsendable(widget):
    """Synced text traits holding a lone surrogate (they would fail to reach the browser)."""
    texts = {k: getattr(widget, k) for k in widget.keys if isinstance(getattr(widget, k), str)}
    found = [
        (type(widget).__name__, k) for k, v in texts.items() if any("\udc80" <= c <= "\udcff" for c in v)
    ]
    for child in getattr(widget, "children", ()):
        found += unsendable(child)
    return found
