"""The notebook front end: `%emq` (one command) and `%%emq` (a runbook step list).

Parse with `grammar`, do with `verbs`.  The line is taken literally (no `$x` or
`{x}` expansion); a word written `{{name}}` is the notebook variable `name`.
Errors are `EMQError`s whose `_render_traceback_` prints one line and still fails
the cell (nbval, "Run all"); a refusal prints one line and is returned, so a runbook
can show one.  `EMQMagics` is the `Magics` class `%load_ext emq_notebook` registers;
its traitlets are the settings (`%config EMQMagics.default_limit = 50`).
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from traitlets import Enum, Float, Int, TraitType, Unicode, observe, validate

from . import grammar, settings, verbs
from .decoding import one_line, shown_ids, visible
from .errors import EMQError, Refused
from .redaction import scrub, secrets_of


class NotebookSession(verbs.Session):
    """A session whose bounded loops show an ipywidgets progress bar, and which
    remembers the refusals it printed in the running cell (see `show_refusal`)."""

    surface = "magic"

    def __init__(self) -> None:
        super().__init__()
        self.printed: list[Refused] = []
        self.magics: EMQMagics | None = None

    def set_reason(self, text: str | None) -> None:
        """`%emq reason TEXT` is `%config EMQMagics.reason` too."""
        super().set_reason(text)
        if self.magics is not None:
            self.magics.reason = self.settings.reason  # type: ignore[attr-defined]

    def progress(self, label: str, total: int) -> Any:
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

    def forget_printed(self, *_info: Any) -> None:
        self.printed.clear()


SESSION = NotebookSession()


def run(line: str, cell: str | None = None, namespace: dict[str, Any] | None = None) -> Any:
    """`%emq line` (cell None) or `%%emq` (each line of `cell` a step): what the magic
    returns.  A cell stops at the first step that refused or did not run (a help
    request), and returns the list of the results of the steps it ran.  An error's line
    is shown as the shell shows one (`redacted`)."""
    try:
        return _run(line, cell, namespace)
    except EMQError as exc:
        raise redacted(exc, line if cell is None else cell, namespace or {}) from None


def redacted(exc: EMQError, typed: str, namespace: dict[str, Any]) -> EMQError:
    """`exc` with its line on one line (`one_line`) and no password in it (`scrub`): of
    any URL it shows, of the URLs typed and of the notebook variables a `{{name}}`
    typed names (a value quoted in an error, `env is a short printable word, not
    'redis://admin:pw@h'`, or a path shown with its `//` made `/`). A refusal's line is
    built from names the gate passed, and stays as it is."""
    if isinstance(exc, Refused) or len(exc.args) != 1 or not isinstance(exc.args[0], str):
        return exc
    texts = [typed, *(_text_of(namespace.get(name, "")) for name in _NAMED.findall(typed))]
    secrets = [x for text in texts for x in secrets_of(text)]
    secrets += [x for c in SESSION.connections.values() for x in c._secrets]
    exc.args = (one_line(scrub(exc.args[0], sorted(set(secrets), key=len, reverse=True))),)
    return exc


def _text_of(value: object) -> str:
    """A notebook variable as text, "" for one whose `str` fails (grammar.substitute
    has said so in the error's line already)."""
    try:
        return str(value)
    except Exception:  # any failure of the notebook's own object
        return ""


# a `{{name}}` written in a line: the notebook variable `name` (grammar.substitute)
_NAMED = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")


def _run(line: str, cell: str | None, namespace: dict[str, Any] | None) -> Any:
    if cell is None:
        return _answer(verbs.execute(SESSION, verbs.parse(SESSION, line, namespace)))
    results: Steps = Steps()
    steps = [text for text in cell.splitlines() if grammar.split(text)]
    for i, step in enumerate(steps, 1):
        try:
            ns = verbs.parse(SESSION, step, namespace)
            result = verbs.execute(SESSION, ns)
        except EMQError as exc:
            raise type(exc)(f"step {i} ({grammar.split(step)[0]}): {exc}") from None
        results.append(_answer(result))
        if isinstance(result, Refused) or getattr(ns, "show_help", False):
            SESSION.say(f"stopped at step {i} of {len(steps)}: {step.strip()}")
            break
    return results


def _answer(result: Any) -> Any:
    if isinstance(result, Refused):
        SESSION.printed.append(result)  # printed once by verbs.execute
    return result


class Steps(list):
    """The results of a `%%emq` cell, one per step that ran.  Each step printed its own
    line; shown as a cell's result it displays the last step's value (a frame, a
    dict), as a single `%emq` line would, and nothing for an action or a refusal."""

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if self and self[-1] is not None and not isinstance(self[-1], Refused):
            display(self[-1])


def show_refusal(refusal: Refused) -> None:
    """How IPython displays a refusal: its one line (`Refused._repr_mimebundle_`,
    text/plain and text/html), except in the very cell whose `%emq` line printed it
    already (the refusal is that cell's result): there it shows once, not twice.  In
    any later cell it shows again."""
    from IPython.display import publish_display_data

    if any(r is refusal for r in SESSION.printed):
        return
    data, metadata = refusal._repr_mimebundle_()
    publish_display_data(data, metadata)


def setting_traits() -> dict[str, TraitType]:
    """One `%config EMQMagics.<name>` trait per field of `settings.Settings`, with its
    default and help; its value is checked by the field's own check (`_valid`)."""
    traits: dict[str, TraitType] = {}
    for f in fields(settings.Settings):
        default: Any = f.default
        help = f.metadata["help"]
        if f.metadata["choices"]:
            trait: TraitType = Enum(list(f.metadata["choices"]), default, help=help)
        elif f.type == "int":
            trait = Int(default, help=help)
        elif f.type == "float":
            trait = Float(default, help=help)
        else:
            trait = Unicode(default, allow_none=True, help=help)
        traits[f.name] = trait.tag(config=True)
    return traits


@magics_class
class EMQMagics(Magics):
    """`%emq VERB QUEUE [ID] [options]`; `%emq?` or `%emq help` for the grammar."""

    # the settings as traits: a class body's namespace is a dict, so they are declared
    # where traitlets looks for them, from the one declaration in settings.py
    locals().update(setting_traits())

    def __init__(self, shell: Any = None, **kwargs: Any):
        super().__init__(shell=shell, **kwargs)
        # the working directory's [tool.emq_notebook], unless %config already set a value
        for name, value in settings.from_pyproject().items():
            if name not in self.config.get("EMQMagics", {}):
                setattr(self, name, value)
        self._push()

    @validate(*settings.NAMES)
    def _valid(self, proposal: Any) -> Any:
        return settings.check(proposal["trait"].name, proposal["value"], "%config EMQMagics")

    @observe(*settings.NAMES)
    def _changed(self, change: Any) -> None:
        self._push()

    def _push(self) -> None:
        SESSION.settings.update({n: getattr(self, n) for n in settings.NAMES}, where="%config EMQMagics")

    @no_var_expand
    @line_cell_magic
    def emq(self, line: str, cell: str | None = None) -> Any:
        return run(line, cell, self.shell.user_ns if self.shell is not None else None)


EMQMagics.emq.__doc__ = grammar.grammar()


def _plain(value: Any, p: Any, cycle: bool) -> None:
    p.text(visible(repr(value)))


def _html(frame: Any) -> str | None:
    # (pandas clips a long cell in HTML, not a long index value: another node's id)
    markup = shown_ids(frame)._repr_html_()
    return None if markup is None else visible(markup)


def show_frames(ipython: Any) -> None:
    """Show pandas frames, series and indexes through `visible`: a frame holding text
    with bytes that are not UTF-8 (a foreign row) or a control character shows each as
    `\\xNN`, as the `emq` shell prints it; the frame keeps the text as read."""
    import pandas as pd

    formatters = ipython.display_formatter.formatters
    for kind in (pd.DataFrame, pd.Series, pd.Index):
        formatters["text/plain"].for_type(kind, _plain)
    formatters["text/html"].for_type(pd.DataFrame, _html)


def register(ipython: Any) -> EMQMagics:
    """Register `%emq` / `%%emq`, `%config EMQMagics`, the refusal display, the escaped
    display of frames (`show_frames`) and completion."""
    from .completion import install

    magics = EMQMagics(shell=ipython)
    SESSION.magics = magics
    ipython.register_magics(magics)
    if magics not in ipython.configurables:
        ipython.configurables.append(magics)
    formatter = ipython.display_formatter.ipython_display_formatter
    formatter.for_type(Refused, show_refusal)
    show_frames(ipython)
    if SESSION.forget_printed not in ipython.events.callbacks["pre_run_cell"]:
        ipython.events.register("pre_run_cell", SESSION.forget_printed)
    install(ipython, SESSION)
    return magics
