"""The command grammar: how a `%emq` line or `emq` argv becomes a parsed command.

Parsing only: the `verbs` package does the work, from the verbs `registry.py` declares.
A line that does not parse raises `UsageProblem` (one line, and it fails a notebook
cell, which IPython's `UsageError` would not under nbval).

- `split` cuts a line into words as a POSIX shell does (quotes, backslash) and drops a
  `# comment` that starts a word, in time linear in the line's length.
- `substitute` replaces a word written exactly `{{name}}` by the notebook's `name` (a
  str as is, a dict or list as JSON, anything else `str()`); nothing else is expanded.
- Payload arguments (JSON) and free text are literal: a word there is data even when it
  reads `-h` or `$x`. Free text runs to the end of the line; only a bare word that is
  exactly one of the verb's options is still that option. A quoted or substituted word
  is always data.
- `-h` / `--help` anywhere else, `help VERB` and `VERB -h` ask for the verb's help; an
  empty line, `-h`, `--help` and `help` show the whole grammar.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass
from typing import Any, NoReturn

from . import registry
from .checks import MAX_WHOLE
from .checks import duration_ms as _checked_ms
from .errors import UsageProblem
from .registry import Arg, Verb

HELP_WORDS = ("-h", "--help")


def duration_ms(text: str) -> int:
    """`250ms`, `30s`, `5m`, `1h`, `2d` (a bare number is milliseconds) -> ms."""
    return _checked_ms(text)


# argparse reports an ArgumentTypeError's own text: "argument --budget: 0 must be >= 1"
def whole_arg(text: str) -> int:
    """A whole number from 1 (a budget, a count), as argparse's `type`: a word that is
    not one is `ArgumentTypeError` (`checks.whole` checks a value a Python caller gives)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_WHOLE:
        raise argparse.ArgumentTypeError(f"{value} must be from 1 to {MAX_WHOLE:,}")
    return value


def limit(text: str) -> int:
    """A row limit: a whole number, 0 meaning no limit."""
    return 0 if text.strip() == "0" else whole_arg(text)


def delay(text: str) -> int:
    try:
        return duration_ms(text)
    except UsageProblem as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration(text: str) -> int:
    value = delay(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be at least 1ms")
    return value


def seconds(text: str) -> float:
    """A positive number of seconds, at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= 86_400):
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 and at most 86400 seconds")
    return value


_RATE = re.compile(r"(\d+(?:\.\d+)?)(?:/(s|m|h))?\Z")


def rate(text: str) -> float:
    """`50/s`, `3000/m`, `20/h` or a bare number (per second) -> jobs per second."""
    m = _RATE.match(text.strip())
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"bad rate {text!r}: use e.g. 50/s, 3000/m")
    return float(m.group(1)) / {"s": 1, "m": 60, "h": 3600}[m.group(2) or "s"]


def fraction(text: str) -> float:
    """A share above 0 and at most 1 (`0.5`), or a percentage (`50%`)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction (0.5, 50%)") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text} must be above 0 and at most 1")
    return value


# -- splitting ---------------------------------------------------------------
# Each match is one run of the line, scanned once by the regex engine: the whole
# split is linear in the line's length (shlex grows its token a character at a time,
# which is quadratic on a megabyte payload).
_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | '(?P<single>[^']*)'
  | "(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"
  | \\(?P<escaped>.)
  | (?P<bare>[^\s'"\\]+)
  | (?P<open>['"\\])
""",
    re.S | re.X,
)
_IN_DOUBLE = re.compile(r"\\([\\\"])")


def tokens(line: str) -> list[tuple[str, str]]:
    """(kind, text) runs of `line`; `split` joins them into words."""
    return [(m.lastgroup or "", m.group(m.lastgroup or 0)) for m in _TOKEN.finditer(line)]


class Quoted(str):
    """A word that was quoted (in part) or substituted: always data, never an option
    or a help request."""


def _word(parts: list[str], quoted: bool) -> str:
    text = "".join(parts)
    return Quoted(text) if quoted else text


def split(line: str) -> list[str]:
    """The words of `line`, as a POSIX shell splits them; a word starting with `#`
    begins a comment that runs to the end of the line.  A word with a quoted part is
    a `Quoted` str."""
    words: list[str] = []
    word: list[str] | None = None
    quoted = False
    for kind, text in tokens(line):
        if kind == "space":
            if word is not None:
                words.append(_word(word, quoted))
                word, quoted = None, False
            continue
        if kind == "open":
            what = "no closing quotation" if text in "'\"" else "a backslash at the end"
            raise UsageProblem(f"cannot split the line: {what}")
        if kind == "bare" and word is None and text.startswith("#"):
            break
        if word is None:
            word = []
        quoted = quoted or kind != "bare"
        word.append(_IN_DOUBLE.sub(r"\1", text) if kind == "double" else text)
    if word is not None:
        words.append(_word(word, quoted))
    return words


_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}\Z")


def _failure(exc: BaseException) -> str:
    """`TypeError: ...`, even for an exception whose own `str()` raises."""
    try:
        said = str(exc)
    except Exception:
        said = "(its message cannot be shown)"
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


def substitute(words: list[str], namespace: dict[str, Any]) -> list[str]:
    """Each word written exactly `{{name}}` -> the value of `name` in `namespace`:
    a str as is, a dict or list as JSON, anything else `str()`.  An unknown name, a
    value that is not JSON, and a `str()` that raises are each one `UsageProblem` line."""
    out = []
    for word in words:
        m = _PLACEHOLDER.match(word)
        if m is None:
            out.append(word)
            continue
        name = m.group(1)
        if name not in namespace:
            raise UsageProblem(f"{{{{{name}}}}}: no variable {name!r} in the notebook")
        value = namespace[name]
        if isinstance(value, str):
            text = value
        elif isinstance(value, (dict, list)):
            try:
                text = json.dumps(value)
            except Exception as exc:  # not JSON: a set inside, a cycle, a failing repr
                raise UsageProblem(f"{{{{{name}}}}}: not JSON: {_failure(exc)}") from None
        else:
            try:
                text = str(value)
            except Exception as exc:  # any object of the notebook's, any failure of its own
                raise UsageProblem(f"{{{{{name}}}}}: cannot be written as text: {_failure(exc)}") from None
        out.append(Quoted(text))
    return out


# -- the front ends ----------------------------------------------------------
@dataclass(frozen=True)
class Front:
    """How a front end writes a command, in its help and its error lines: `%emq` in a
    notebook; `emq` in a shell, where the server is named before the verb."""

    command: str  # what a command starts with
    grammar_hint: str  # where the whole grammar is shown
    before_verb: str = ""  # in a server verb's usage line, what comes before the verb
    epilog: str | None = None  # under a verb's options
    # (as the registry's help texts say it, as this front end says it), in order
    words: tuple[tuple[str, str], ...] = ()

    def see(self, verb: str | None = None) -> str:
        """`see %emq pause --help`; with no verb, where the whole grammar is."""
        return f"see {self.command} {verb} --help" if verb else f"see {self.grammar_hint}"

    def text(self, help: str) -> str:
        """A help text of the registry (written as the notebook says it) in this front
        end's words."""
        for said, here in self.words:
            help = help.replace(said, here)
        return help


NOTEBOOK = Front("%emq", "%emq?")
SHELL = Front(
    "emq",
    "emq help",
    before_verb="[--url URL] ",
    epilog="the server is --url, else EMQ_URL; the options before the verb: emq --help",
    words=(
        ("%%emq reason", "[tool.emq_notebook] reason"),
        ("%%config ", "[tool.emq_notebook] "),
        ("%%emq ", "emq "),
    ),
)


# -- the parser --------------------------------------------------------------
class Parser(argparse.ArgumentParser):
    """Raises `UsageProblem` (one line ending in where to read more, in the words of
    `front`) instead of printing and exiting."""

    def __init__(self, *a: Any, front: Front = NOTEBOOK, topic: str | None = None, **kw: Any):
        super().__init__(*a, **kw)
        self.front, self.topic = front, topic

    def error(self, message: str) -> NoReturn:
        raise UsageProblem(f"{message} — {self.front.see(self.topic)}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageProblem(message or "bad command")


_KNOWN_METAVARS = {
    whole_arg: "N",
    limit: "N",
    int: "N",
    float: "N",
    seconds: "SECONDS",
    delay: "DURATION",
    duration: "DURATION",
    rate: "RATE",
    fraction: "FRACTION",
}


def _metavar(a: Arg) -> str | None:
    if not a.is_option:
        return str(a.kwargs.get("metavar", a.names[0].upper()))
    if a.kwargs.get("action") == "store_true" or "choices" in a.kwargs:
        return None
    kind = a.kwargs.get("type")
    known = _KNOWN_METAVARS.get(kind) if kind is not None else None
    return str(a.kwargs.get("metavar") or known or a.names[0].lstrip("-").upper())


def _usage_word(a: Arg) -> str:
    """How one argument reads in the grammar: QUEUE, [ID], LINE..., [--budget N]."""
    meta = _metavar(a)
    if not a.is_option:
        if a.many:
            return f"[{meta} ...]"
        return {"?": f"[{meta}]", "+": f"{meta}..."}.get(str(a.kwargs.get("nargs")), str(meta))
    if "choices" in a.kwargs:
        return f"[{a.names[0]} {'|'.join(a.kwargs['choices'])}]"
    word = a.names[0] if meta is None else f"{a.names[0]} {meta}"
    return word if a.kwargs.get("required") else f"[{word}]"


def usage(verb: str) -> str:
    return " ".join([verb, *(_usage_word(a) for a in _verb(verb).args)])


def _add(p: argparse.ArgumentParser, a: Arg, front: Front) -> None:
    meta = _metavar(a)
    kw = dict(a.kwargs)
    if meta and "choices" not in kw:
        kw["metavar"] = meta
    if "help" in kw:
        kw["help"] = front.text(kw["help"])
    p.add_argument(*a.names, **kw)


def _verb_parser(v: Verb, *, positionals: bool, front: Front) -> Parser:
    """The verb's parser: with its positionals for help, without them for parsing
    (the positionals are placed by `parse`, which knows which words are data)."""
    before = front.before_verb if v.needs_server else ""
    p = Parser(
        prog=f"{front.command} {v.name}",
        add_help=False,
        allow_abbrev=False,
        description=front.text(v.summary),
        usage=f"{front.command} {before}{usage(v.name)}".replace("%", "%%"),
        epilog=front.epilog if v.needs_server else None,
        front=front,
        topic=v.name,
    )
    for a in v.args:
        if positionals or a.is_option:
            _add(p, a, front)
    if positionals:
        p.add_argument("-h", "--help", action="store_true", help="this verb's options")
    return p


_CACHE: dict[tuple[str, bool, int, Front], Parser] = {}


def verb_parser(name: str, *, positionals: bool = True, front: Front = NOTEBOOK) -> Parser:
    key = (name, positionals, len(registry.VERBS), front)
    if key not in _CACHE:
        _CACHE[key] = _verb_parser(_verb(name, front), positionals=positionals, front=front)
    return _CACHE[key]


def _verb(name: str, front: Front = NOTEBOOK) -> Verb:
    v = registry.lookup(name)
    if v is None:
        raise UsageProblem(f"unknown verb {name!r} — {front.see()}")
    return v


def verb_help(verb: str, front: Front = NOTEBOOK) -> str:
    """One verb's usage and options, in the words of `front` (`%emq pause QUEUE ...` in
    a notebook, `emq [--url URL] pause QUEUE ...` in a shell)."""
    return verb_parser(verb, front=front).format_help()


def verb_lines() -> list[str]:
    """Every verb's usage and summary, two lines a verb (the grammar's body)."""
    lines = []
    for v in registry.VERBS.values():
        lines.append(f"  {usage(v.name)}")
        lines.append(f"      {v.summary}")
    return lines


def grammar() -> str:
    """The whole grammar, one verb a line (what `%emq`, `%emq?` and `%emq help` show)."""
    lines = ["%emq VERB QUEUE [ID] [options]   (%emq VERB -h for one verb)", "", *verb_lines()]
    lines += [
        "",
        "Durations: 250ms, 30s, 5m, 1h.  A refusal prints one line with its reason",
        "(gone, locked, not_dead, not_paused, active) and is returned, not raised.",
        "A word written {{name}} is the notebook variable `name` (a dict or list as JSON);",
        "nothing else is expanded.  Payloads and free text are taken as written (`-h`",
        "there is data).  A word starting with # begins a comment.",
    ]
    return "\n".join(lines)


_NUMBER = re.compile(r"-\d+(\.\d*)?\Z|-\.\d+\Z")


def _place(v: Verb, words: list[str]) -> tuple[list[str], list[str], bool]:
    """Sort the words after the verb into (option words, positional words, help asked)."""
    options, slots = v.options, v.positionals
    opts: list[str] = []
    pos: list[str] = []
    asked = False
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        slot = slots[min(len(pos), len(slots) - 1)] if slots else None
        if isinstance(w, Quoted):
            pos.append(w)  # quoted or substituted: data
            continue
        name = w.split("=", 1)[0] if w.startswith("--") else w
        if name in options:
            opts.append(w)
            if options[name].takes_value and "=" not in w and i < len(words):
                opts.append(words[i])
                i += 1
            continue
        if slot is not None and slot.literal and (len(pos) < len(slots) or slot.free):
            pos.append(w)  # data, as written
            continue
        if w in HELP_WORDS:
            asked = True
        elif w.startswith("-") and len(w) > 1 and not _NUMBER.match(w):
            opts.append(w)  # unknown: the parser says so
        else:
            pos.append(w)
    return opts, pos, asked


def _assign(v: Verb, ns: argparse.Namespace, pos: list[str], p: Parser) -> None:
    slots = v.positionals
    fixed = [a for a in slots if not a.rest]
    free = [a for a in slots if a.rest]
    required = [a for a in fixed if a.kwargs.get("nargs") != "?"]
    needed = [a for a in free if a.kwargs.get("nargs") != "*"]  # free text of no words may be asked
    missing = [a for a in required[len(pos) :]] + (needed if len(pos) <= len(fixed) else [])
    if missing:
        p.error("the following arguments are required: " + ", ".join(str(_metavar(a)) for a in missing))
    if not free and len(pos) > len(fixed):
        p.error("unrecognized arguments: " + " ".join(pos[len(fixed) :]))
    for a, w in zip(fixed, pos, strict=False):
        choices = a.kwargs.get("choices")
        if choices is not None and w not in choices:
            p.error(f"argument {_metavar(a)}: invalid choice: {w!r} (choose from {', '.join(choices)})")
        setattr(ns, a.dest, w)
    for a in fixed[len(pos) :]:
        setattr(ns, a.dest, a.kwargs.get("default"))
    if free:
        setattr(ns, free[0].dest, pos[len(fixed) :])


def parse(
    line: str | list[str], namespace: dict[str, Any] | None = None, front: Front = NOTEBOOK
) -> argparse.Namespace:
    """Parse one command (a line, or argv words) into a namespace with `.verb`.

    With `namespace` (the notebook's), `{{name}}` words are substituted.  A help
    request answers a namespace with `show_help=True` (and `verb="help"` for the
    whole grammar).  A line that does not parse says where to read more in the
    words of `front`."""
    words = split(line) if isinstance(line, str) else list(line)
    if namespace is not None:
        words = substitute(words, namespace)
    if not words or (words[0] in HELP_WORDS and not isinstance(words[0], Quoted)):
        return argparse.Namespace(verb="help", topic=None, show_help=False)
    v = _verb(words[0], front)
    opts, pos, asked = _place(v, words[1:])
    if asked:
        return argparse.Namespace(verb=v.name, show_help=True)
    p = verb_parser(v.name, positionals=False, front=front)
    ns = p.parse_args(opts)
    _assign(v, ns, pos, p)
    ns.verb, ns.show_help = v.name, False
    return ns
