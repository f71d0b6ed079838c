"""What every panel shares: a status line that shows the last result or typed
refusal, and a short, stable repr (what nbval compares)."""

from __future__ import annotations

import html
from typing import Any, Callable

import ipywidgets as w

from ..errors import EMQError, Refused


class Panel(w.VBox):
    """A VBox with a status line; `attempt` runs a verb and reports its answer there."""

    title = "panel"

    def __init__(self, **kw):
        self.status = w.HTML(value="")
        self.last: Any = None
        super().__init__(**kw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.title})"

    def say(self, text: str, kind: str = "ok") -> None:
        colour = {"ok": "#1a7f37", "refused": "#9a6700", "error": "#cf222e"}[kind]
        self.status.value = f'<span style="color:{colour}">{html.escape(text)}</span>'
        self.status_text = text

    def attempt(self, verb: Callable[..., Any], *args, done: str | Callable[[Any], str] = "",
                **kwargs) -> Any:
        """Run one verb; show its result, its refusal, or its error on the status line."""
        try:
            result = verb(*args, **kwargs)
        except Refused as refusal:
            self.last = refusal
            self.say(refusal.line(), "refused")
            return refusal
        except EMQError as exc:
            self.last = exc
            self.say(f"error: {exc}", "error")
            return exc
        self.last = result
        self.say(done(result) if callable(done) else done)
        return result


def table(rows: dict[str, Any] | list[tuple], head: tuple[str, ...] = ()) -> str:
    """A small HTML table (escaped)."""
    items = rows.items() if isinstance(rows, dict) else rows
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                    for r in ((k, *([v] if not isinstance(v, tuple) else v)) for k, v in items))
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f'<table class="emq">{"<tr>" + th + "</tr>" if th else ""}{cells}</table>'
