"""Tab completion of `%emq` lines (and of the lines of a `%%emq` cell) in IPython.

Built from the verb registry: the verbs, a verb's options and their choices; in a
`queue` slot the queues the connection knows (`frames.queues`: a keystroke never walks
the keyspace); in an `id` slot job ids from that queue's sets (a few hundred at most);
in a `group` slot the lanes that start with what is typed, from one bounded walk
(`lanes.names`); an option's value its choices, the queues or the paths of one folder;
`use` the named connections and `help` the verbs. A server that cannot be reached
completes nothing, never an error.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from IPython.core.completer import CompletionContext, SimpleCompletion, SimpleMatcherResult, context_matcher

from . import frames, grammar, lanes, registry
from .errors import EMQError, UsageProblem
from .keyspace import STATES, queue_key

# how long job ids (and a first look at the queues that failed) are kept before the
# server is asked again
CACHE_S = 5.0
# job ids offered for one `id` slot, at most (per set and in all)
MAX_IDS = 300
# which sets a job verb's ids come from (others: every state set)
ID_SETS = {
    "reprocess": ("dead",),
    "complete": ("active",),
    "fail": ("active",),
    "progress": ("pending", "active"),
    "log": ("active", "pending", "dead", "schedule"),
}


class Completer:
    """The completions of one session (its current connection), with a short cache."""

    def __init__(self, session: Any):
        self.session = session
        self._cache: dict[tuple, tuple[float, list[str]]] = {}

    def _cached(self, key: tuple, fetch: Any) -> list[str]:
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < CACHE_S:
            return hit[1]
        try:
            value = list(fetch())
        except (EMQError, OSError):
            value = []
        self._cache[key] = (now, value)
        return value

    def _conn_key(self) -> tuple:
        conn = self.session.conn
        return (id(conn), conn.label)

    def queues(self) -> list[str]:
        conn = self.session.conn
        if conn.directory.swept_at is not None:  # found already: answered from memory, no I/O
            return frames.queues(conn)
        # the first look walks the server: a server that does not answer is asked again
        # only once the cache has expired, not at every keystroke
        return self._cached(("queues", *self._conn_key()), lambda: frames.queues(conn))

    def job_ids(self, verb: str, q: str) -> list[str]:
        def fetch() -> list[str]:
            conn = self.session.conn
            seen: dict[str, None] = {}
            for state in ID_SETS.get(verb, STATES):
                members, _ = frames.members_page(conn, queue_key(q, state), 0, MAX_IDS)
                seen.update(dict.fromkeys(members))
            return list(seen)[:MAX_IDS]

        try:
            queue_key(q, "pending")
        except (EMQError, ValueError):
            return []
        return self._cached(("ids", verb, q, *self._conn_key()), fetch)

    def groups(self, q: str, prefix: str = "") -> list[str]:
        """The names of queue `q`'s lanes that start with `prefix`, at most `MAX_IDS`,
        from one walk of at most `lanes.NAMES_A_CALL` lanes."""

        def fetch() -> list[str]:
            return lanes.names(self.session.conn, q, prefix)[:MAX_IDS]

        try:
            queue_key(q, "pending")
        except (EMQError, ValueError):
            return []
        return self._cached(("groups", q, prefix, *self._conn_key()), fetch)

    def words(self, text: str) -> list[str]:
        """Completions for the command text before the cursor (without `%emq`)."""
        try:
            words = grammar.split(text)
        except UsageProblem:
            return []
        if not text or text[-1].isspace():
            words.append("")
        *done, prefix = words
        if not done:
            return [w for w in [*registry.VERBS, *grammar.HELP_WORDS] if w.startswith(prefix)]
        v = registry.lookup(done[0])
        if v is None:
            return []
        after = done[1:]
        if after and after[-1] in v.options and v.options[after[-1]].takes_value:
            return [c for c in self._value(v.options[after[-1]], prefix) if c.startswith(prefix)]
        if prefix.startswith("-"):
            used = set(after)
            names = [
                n
                for a in v.args
                if a.is_option and not set(a.names) & used
                for n in a.names
                if n.startswith("--")
            ]
            return [n for n in [*names, "--help"] if n.startswith(prefix)]
        _opts, pos, _asked = grammar._place(v, after)
        slots = v.positionals
        if len(pos) >= len(slots) and not (slots and slots[-1].many):
            return []
        slot = slots[min(len(pos), len(slots) - 1)]
        return [c for c in self._slot(v, slot, pos, prefix) if c.startswith(prefix)]

    def _value(self, option: registry.Arg, prefix: str) -> list[str]:
        """An option's values: its choices; the queues for one whose metavar is QUEUE
        (`move --to`); the files and folders `prefix` begins for PATH (`export --to`,
        `import --from`)."""
        if "choices" in option.kwargs:
            return list(option.kwargs["choices"])
        meta = option.kwargs.get("metavar")
        if meta == "QUEUE":
            return self.queues()
        if meta == "PATH":
            return _paths(prefix)
        return []

    def _slot(self, v: registry.Verb, slot: registry.Arg, pos: list[str], prefix: str = "") -> list[str]:
        if "choices" in slot.kwargs:
            return list(slot.kwargs["choices"])
        if slot.dest == "queue":
            return self.queues()
        if slot.dest == "id" and pos:
            return self.job_ids(v.name, pos[0])
        if slot.dest == "group" and pos:
            return self.groups(pos[0], prefix)
        if v.name == "use" and slot.dest == "name":
            return sorted(self.session.connections)
        if v.name == "help":
            return list(registry.VERBS)
        return []


# the paths a PATH value offers at most (a folder of a million files offers its first ones)
MAX_PATHS = 300


def _paths(prefix: str) -> list[str]:
    """The files and folders (a folder ending `/`) whose path begins `prefix`, from the
    one folder it names: no walk below it."""
    folder, _, start = prefix.rpartition("/")
    where = Path(folder or ".") if folder or not prefix.startswith("/") else Path("/")
    found = []
    try:
        for entry in sorted(itertools.islice(where.iterdir(), 10 * MAX_PATHS)):
            if entry.name.startswith(start):
                name = (folder + "/" if folder or prefix.startswith("/") else "") + entry.name
                found.append(name + ("/" if entry.is_dir() else ""))
    except OSError:
        return []
    return found[:MAX_PATHS]


def _command_text(context: CompletionContext) -> str | None:
    """The `%emq` command before the cursor, or None when the cursor is not in one."""
    line = context.text_until_cursor
    stripped = line.lstrip()
    if stripped.startswith("%emq ") or stripped == "%emq":
        return stripped[len("%emq") :].lstrip() if stripped != "%emq" else None
    first = context.full_text.split("\n", 1)[0].strip()
    if context.cursor_line > 0 and (first == "%%emq" or first.startswith("%%emq ")):
        return line.lstrip()
    return None


def matcher_for(session: Any) -> Any:
    completer = Completer(session)

    @context_matcher(identifier="emq_notebook")
    def emq_matcher(context: CompletionContext) -> SimpleMatcherResult:
        text = _command_text(context)
        if text is None:
            return SimpleMatcherResult(completions=[], suppress=False)
        found = completer.words(text)
        return SimpleMatcherResult(
            completions=[SimpleCompletion(text=w, type="emq") for w in found], suppress=True, ordered=True
        )

    emq_matcher.completer = completer
    return emq_matcher


def install(ipython: Any, session: Any) -> None:
    """Append the `%emq` matcher to the shell's completer (once)."""
    matchers = ipython.Completer.custom_matchers
    matchers[:] = [m for m in matchers if getattr(m, "matcher_identifier", None) != "emq_notebook"]
    matchers.append(matcher_for(session))
