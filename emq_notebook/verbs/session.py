"""A front end's session and what every verb shares: `Session` (the named connections,
the settings, the output), `execute` (one parsed command -> one call), `confirm` (the
one confirmation gate, stating the count, the connection and its env) and the options
several verbs take; then the session verbs (connect, use, connections, help).

`execute(session, ns)` runs a parsed line: an action prints one line and returns None,
a query returns its value. A refusal's line is printed and the refusal returned; every
other `EMQError` propagates (and fails a notebook cell).
"""

from __future__ import annotations

import contextlib
import re
from argparse import Namespace
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd

from .. import audit, registry
from ..connector import Connection, connect
from ..defaults import EXECUTORS
from ..errors import EMQError, Refused, UsageProblem
from ..grammar import NOTEBOOK, Front, duration, fraction, grammar, rate, verb_help, whole_arg
from ..grammar import parse as parse_words
from ..grammar import split as split_words
from ..keyspace import STATES
from ..redaction import scrub, secrets_of
from ..registry import arg, opt, verb
from ..settings import Settings

DEFAULT_NAME = "default"
_NAME = re.compile(r"[A-Za-z0-9_.@+\-]{1,64}\Z")


class Session:
    """A front end's named connections (one current), its settings and its output.

    The current connection is opened lazily on first use (`connect()`: EMQ_URL, else
    the embedded default) with the settings' executor and env, unless a `connect`
    failed while none was current (`connect_failed`): then no server is guessed in
    place of the one asked for, and every verb needing one refuses (`UsageProblem`,
    one line) until a `connect` or a `use` succeeds."""

    # where its commands are typed, as the audit trail records it (`audit.SURFACES`)
    surface = "python"
    # how its commands are written, in its help and its error lines
    front: Front = NOTEBOOK

    def __init__(self, say: Callable[[str], None] = print, settings: Settings | None = None):
        self.out = say  # where the session's lines go
        # while a command runs (`_last_line`): its line said last, waiting for the next
        self._held: list[str] | None = None
        self.settings = settings if settings is not None else Settings()
        self.connections: dict[str, Connection] = {}
        self.current: str | None = None
        # the connect that failed while no connection was current (None: none did)
        self.failed: str | None = None

    @property
    def conn(self) -> Connection:
        return self.connection()

    @conn.setter
    def conn(self, value: Connection) -> None:
        self.add(value)

    def connection(self, what: str = "") -> Connection:
        """The current connection, opened on first use; after a connect that failed
        with none current, `UsageProblem` instead (`what`, the command that needed it,
        begins its line)."""
        if self.current is None:
            if self.failed is not None:
                c = self.front.command
                raise UsageProblem(
                    f"{what + ': ' if what else ''}no connection is current: {self.failed}; "
                    f"{c} connect URL, or {c} use NAME, first"
                )
            self.add(connect(executor=self.settings.executor, env=self.settings.env, name=DEFAULT_NAME))
        assert self.current is not None
        return self.connections[self.current]

    def add(self, conn: Connection) -> None:
        """Keep `conn` under its name (`default` when it has none) and make it current."""
        name = conn.name or DEFAULT_NAME
        self.connections[name] = conn
        self.use(name)

    def use(self, name: str) -> Connection:
        """Make the connection called `name` current (`UsageProblem` for a name not kept)."""
        conn = self.get(name)
        self.current, self.failed = name, None
        return conn

    def connect_failed(self, exc: BaseException) -> str:
        """The line of a connect that failed with `exc`, saying which connection is
        current now: the one that was, still used, or none. With none, the session
        opens no default in its place: every verb needing a server refuses until a
        `connect` or a `use` succeeds, so a write meant for a server that was never
        reached never lands on another."""
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if self.current is not None:
            return f"connect failed: {why}; still using {self.where()}"
        c = self.front.command
        self.failed = f"the last connect failed ({why})"
        return (
            f"connect failed: {why}; no connection is current: every verb refuses until "
            f"{c} connect or {c} use"
        )

    def get(self, name: str | None = None) -> Connection:
        """The connection called `name` (None: the current one)."""
        if name is None:
            return self.conn
        if name not in self.connections:
            known = ", ".join(sorted(self.connections)) or "none yet"
            raise UsageProblem(
                f"no connection named {name!r} (known: {known}) — see {self.front.command} connections"
            )
        return self.connections[name]

    def where(self) -> str:
        """The current connection as a confirmation names it: name, label and env."""
        c = self.conn
        return f"{self.current} ({c.label}, env {c.env or 'not set'})"

    def say(self, text: str) -> None:
        """Say one line (`out`). While a command runs, each line waits for the next, so
        the last can end with the audit's note (`_last_line`)."""
        if self._held is None:
            self.out(text)
            return
        if self._held:
            self.out(self._held.pop())
        self._held.append(text)

    def progress(self, label: str, total: int) -> Callable[[int], None]:
        """A progress reporter for a bounded loop: called with the work done so far."""

        def report(done: int) -> None:
            self.say(f"{label}: {done}/{total}")

        return report

    def set_reason(self, text: str | None) -> None:
        """The session's reason: every audit entry of its commands says it."""
        self.settings.update({"reason": text or None}, where="reason")

    def widget(self, make: Callable[[], Any]) -> Any:
        """Build a widget (panels, the events view); a shell session cannot show one."""
        return make()


def confirm(s: Session, ns: Namespace, count: int, doing: str = "destroy") -> None:
    """The one confirmation gate: a command that would `doing` more than
    `confirm_above` jobs raises `UsageProblem` (nothing written) unless given --yes.
    The line states the count, the connection and its env."""
    if count > s.settings.confirm_above and not getattr(ns, "yes", False):
        raise UsageProblem(
            f"{ns.verb} {ns.queue} would {doing} {count:,} jobs on {s.where()}: add --yes to go ahead"
        )


def parse(session: Session, line: str | list[str], namespace: dict[str, Any] | None = None) -> Namespace:
    """`grammar.parse` in the session's words. A `connect` line that does not parse is
    a connect that failed (`Session.connect_failed`): its line says which connection is
    current, and no password of the line's URL is in it."""
    try:
        return parse_words(line, namespace, session.front)
    except EMQError as exc:
        try:
            words = split_words(line) if isinstance(line, str) else list(line)
        except EMQError:
            words = []
        if not words or words[0] != "connect":
            raise
        said = scrub(str(exc), [x for w in words for x in secrets_of(w)])
        raise type(exc)(session.connect_failed(type(exc)(said))) from None


def execute(session: Session, ns: Namespace) -> Any:
    """Run one parsed command; refusals answered, errors raised.

    The audit trail: the command runs inside `audit.surface(session.surface)` with
    its reason (`--reason`, else the session's `reason` setting), so each write it
    makes leaves an entry saying so; an entry that could not be written ends the
    command's last line (`· audit_failed: ...`), and a command that raised carries
    it in its error line."""
    if getattr(ns, "show_help", False):
        session.say(verb_help(ns.verb, session.front))
        return None
    v = registry.VERBS[ns.verb]
    target = " ".join(str(p) for p in (ns.verb, getattr(ns, "queue", "")) if p)
    if v.needs_server:
        # no connection after a failed connect: refused here, before any I/O
        session.connection(target)
    if v.writes and not getattr(ns, "dry_run", False):
        # before any read: a read-only session refuses the verb, not its first write
        # (a --dry-run only reads: its verbs refuse any write themselves)
        session.conn.refuse_writes(target)
    if v.writes:
        session.conn.audit_keep = session.settings.audit_keep
    reason = getattr(ns, "reason", None) or session.settings.reason
    with (
        audit.surface(audit.typed(session.surface)) as said,
        audit.because(reason),
        _last_line(session) as last,
    ):
        try:
            return v.handler(session, ns)
        except Refused as refusal:
            session.say(refusal.line())
            return refusal
        finally:
            last.suffix = said.suffix()


class _Held:
    suffix = ""


@contextlib.contextmanager
def _last_line(session: Session) -> Iterator[_Held]:
    """Inside the block, each line the session says waits for the next one; the last is
    said when the block ends, with `.suffix` (the audit's note) on its end, or the
    note alone when the command said nothing. A command that raised: its lines as
    they were (its error carries the note)."""
    state = _Held()
    outer, session._held = session._held, []
    raised = True
    try:
        yield state
        raised = False
    finally:
        held, session._held = session._held, outer
        if held:
            session.say(held[0] + ("" if raised else state.suffix))
        elif state.suffix and not raised:
            session.say(state.suffix.removeprefix(" · "))


def budget_of(s: Session, ns: Namespace, *, most: int | None = None) -> int:
    """The line's --budget, else the setting, but at most `most`: the default of a verb
    whose job costs the server more than a drained one (reprocess, `MOVE_BUDGET`; of
    ids given, `ID_BUDGET`), as its Python default is; `--budget` may still ask up to
    `MAX_BUDGET`."""
    if ns.budget is not None:
        return int(ns.budget)
    return s.settings.budget if most is None else min(s.settings.budget, most)


QUEUE = arg("queue")
JOB = arg("id")
BUDGET = opt(
    "--budget", type=whole_arg, default=None, help="jobs per bounded call (default: %%config budget)"
)
YES = opt("--yes", action="store_true", help="confirm a command on more than confirm_above jobs")
# the filtered and controlled forms of reprocess and remove (bulk.py)
ERROR = opt("--error", metavar="GLOB", help="last_error matches this glob (fnmatch: * ? [...])")
PAYLOAD = opt("--payload", metavar="GLOB", help="payload matches this glob")
SIGNATURE = opt("--signature", help="last_error has this signature (as %%emq errors shows it)")
STATE = opt(
    "--state",
    action="append",
    choices=[*STATES, "all"],
    help="the set to search (repeat it for several; default: dead)",
)


def states(ns: Namespace) -> Any:
    """The sets a line's --state names: "all", or a tuple (default: dead)."""
    chosen = ns.state or ["dead"]
    return "all" if "all" in chosen else tuple(chosen)


DRY_RUN = opt("--dry-run", action="store_true", help="print the preview and each id's word; write nothing")
CONTROLLED = (
    opt("--rate", type=rate, help="at most this many jobs a second (50/s)"),
    opt("--trial", type=whole_arg, help="with --all: move N first and watch them"),
    opt("--stop-if-failing", type=fraction, help="with --trial: halt at this share dead again"),
    opt("--watch", type=duration, default=30_000, help="how long a trial is watched (default 30s)"),
)


# -- sessions ------------------------------------------------------------------


@verb(
    "connect",
    "connect (no URL: EMQ_URL, else the embedded default) and make it current",
    arg("url", nargs="?", help="redis://, rediss://, valkey://, valkeys:// or unix://"),
    opt("--embedded", choices=["valkey", "fake"], help="a private embedded server"),
    opt("--executor", choices=list(EXECUTORS), default=None, help="default: %%config executor"),
    opt("--cluster", action="store_true", help="use the Valkey Cluster client"),
    opt("--read-only", action="store_true", help="refuse every writing verb"),
    opt("--env", help="the env this server is, e.g. production (default: %%config env)"),
    opt("--name", help="keep it under this name (default: default)"),
    needs_server=False,
)
def _connect(s: Session, ns: Namespace) -> None:
    """Refuses, as a failed connect (`Session.connect_failed`), a name that is not a
    short word, a URL given with --embedded, and a server that does not answer PING."""
    name = ns.name or DEFAULT_NAME
    try:
        if not _NAME.match(name):
            raise UsageProblem(f"a connection name is a short word, not {name!r}")
        conn = connect(
            ns.url,
            embedded=ns.embedded,
            executor=ns.executor or s.settings.executor,
            cluster=ns.cluster or None,
            read_only=ns.read_only,
            env=ns.env if ns.env is not None else s.settings.env,
            name=name,
        )
        conn.command("PING")  # a wrong URL fails here, as one line
    except EMQError as exc:
        raise type(exc)(s.connect_failed(exc)) from None
    except Exception as exc:
        s.connect_failed(exc)
        raise
    s.add(conn)
    s.say(f"connected: {conn.describe()} as {name}")


@verb("use", "make the named connection current", arg("name"), needs_server=False)
def _use(s: Session, ns: Namespace) -> None:
    conn = s.use(ns.name)
    s.say(f"using {ns.name}: {conn.describe()}")


@verb("connections", "the named connections (redacted), the current one marked", needs_server=False)
def _connections(s: Session, ns: Namespace) -> pd.DataFrame:
    records = [
        {
            "name": n,
            "current": n == s.current,
            "label": c.label,
            "env": c.env,
            "executor": c.executor,
            "read_only": c.read_only,
        }
        for n, c in s.connections.items()
    ]
    cols = ["name", "current", "label", "env", "executor", "read_only"]
    return pd.DataFrame.from_records(records, columns=cols).set_index("name")


@verb(
    "help", "the grammar, or one verb's options", arg("topic", nargs="?", metavar="VERB"), needs_server=False
)
def _help(s: Session, ns: Namespace) -> None:
    s.say(verb_help(ns.topic, s.front) if ns.topic else grammar())
