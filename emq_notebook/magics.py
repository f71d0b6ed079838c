"""The notebook front end: `%emq` (one command) and `%%emq` (a runbook step list).

Parse with `grammar`, do with `commands`.  Errors are `EMQError`s whose
`_render_traceback_` prints one line and still fails the cell (nbval, "Run
all"); a refusal prints one line and is returned, so a runbook can show one.
"""

from __future__ import annotations

from typing import Any

from . import commands, grammar
from .errors import EMQError, Refused


class NotebookSession(commands.Session):
    """A session whose bounded loops show an ipywidgets progress bar."""

    def progress(self, label: str, total: int):
        try:
            import ipywidgets as w
            from IPython.display import display
        except ImportError:  # pragma: no cover - ipywidgets is a dependency
            return super().progress(label, total)
        bar = w.IntProgress(value=0, min=0, max=max(total, 1), description=label.split()[0])
        display(bar)

        def report(done: int) -> None:
            bar.value = min(done, bar.max)
        return report


SESSION = NotebookSession()


def _answer(result: Any) -> Any:
    if isinstance(result, Refused):
        # printed once by commands.execute; returned, but not displayed a second time
        result._ipython_display_ = lambda: None
    return result


def emq(line: str, cell: str | None = None):
    if cell is None:
        return _answer(commands.execute(SESSION, grammar.parse(line)))
    results = []
    steps = [l.strip() for l in cell.splitlines() if l.strip() and not l.strip().startswith("#")]
    for n, step in enumerate(steps, 1):
        try:
            result = commands.execute(SESSION, grammar.parse(step))
        except EMQError as exc:
            raise type(exc)(f"step {n} ({step.split()[0]}): {exc}") from None
        results.append(result)
        if isinstance(result, Refused):
            SESSION.say(f"stopped at step {n} of {len(steps)}: {step}")
            return _answer(result)
    return results[-1] if results else None


emq.__doc__ = grammar.grammar()


def register(ipython) -> None:
    ipython.register_magic_function(emq, "line_cell", "emq")
