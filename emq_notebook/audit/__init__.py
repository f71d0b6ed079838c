"""The audit trail: who did what to which queue, when, why, and what came of it.

Every operator write leaves one entry on the server, in the queue's stream
`emq:audit:{q}` (`keyspace.audit_key`): the queue's hash tag, so it lives in the
queue's cluster slot, and outside its footprint `emq:{q}:*`, so the record of an
obliterate survives it. The entry is appended after the transition, beside it, by
`XADD emq:audit:{q} MAXLEN ~ <keep> * field value ...` (the stream id is the server
time); the transition scripts keep their exact writes.

One recorder writes every entry: `recorded(conn, verb, queue, ...)` (a context
manager) or `audited(verb)` (a decorator of a domain verb whose first parameters
are `conn` and the queue). It works out

- `outcome`: `done`; `refused:<reason>` from the typed refusal (`errors.Refused.reason`);
  `unknown` for a call cut by a wire fault (`WireError`) or interrupted (Ctrl-C),
  whose effect the client cannot know; `error` for anything else raised;
- `count` (jobs touched) and `ids` (the first `FIRST_IDS`, and a digest of all) from the
  verb's answer (`touched`), or as the caller says (`Record.touch`);
- `args`: the options given, secrets never (`options`);
- the identity (`identity`): `who`, `acl_user`, `conn`, `env`, `surface`, `notebook`,
  `reason`. Everything but `acl_user` (the server's `ACL WHOAMI`) is what the
  client says of itself.

Bounded whatever an operator types or another node wrote: each identity field is cut
at `MAX_TEXT` characters (1,000) and each option and each of the first ids at
`MAX_ARG` (200), with "…" (`clipped`), so an entry is a few KB at most (about 30 KB
with 100 ids of 200 characters), and so is the one XADD that writes it.

What writes nothing: a request refused as malformed before any write went (`BadInput`,
`UsageProblem`, `InvalidName`: nothing was attempted, and nothing is sent), a read
(only writing verbs are recorded), a dry run
(`dry_run=True`), a read-only session (`conn.read_only`), a call nested in another
recorded call (the outermost records, once: `obliterate_all` is one entry, not one
per call of `obliterate`), and a queue name the gate refuses (no key can name it; the
verb raises `InvalidName` itself).

A failure to write the entry never hides the verb's result nor replaces its
exception. It becomes a one-line note, `audit_failed: <why>`, delivered
- to the surface block around the call (`with surface("magic") as said:` ...
  `said.suffix()`), which prints it on the same line as the verb's result;
- outside any surface block (Python), as an `AuditNotWritten` warning;
- and, when the verb raised, as a note on its exception (`add_note`), so the
  traceback or the one-line error carries it too.

The package's rooms, each importing only those before it:
- `entry`: what an entry says (outcome, count and ids, args), each value cut to size;
- `context`: where a record comes from (the surface, the reason, the notebook);
- `identities`: who makes it (`connector.who`; a connection names itself: `connector.name_client`);
- `reading`: the streams there are and their entries, newest first (`read`);
- `recorder`: the one path that writes every entry (`audited`, `recorded`, `Record`).
"""

from ..connector import who
from ..decoding import clipped
from .context import (
    SURFACES,
    Said,
    because,
    current_surface,
    in_surface,
    notebook,
    reason_of,
    runbook,
    set_default_surface,
    set_notebook,
    surface,
    typed,
)
from .entry import (
    DATA_ARGS,
    DONE_WORDS,
    FIELDS,
    FIRST_IDS,
    KEEP,
    MAX_ARG,
    MAX_TEXT,
    STARTED,
    digest,
    ids_field,
    options,
    outcome_of,
    storable,
    touched,
)
from .identities import acl_user, identity
from .reading import (
    COLUMNS,
    FIRST_PAGE,
    MAX_READ,
    PAGE_MOST,
    SCAN_COUNT,
    entry_order,
    read,
    streams,
    written,
)
from .recorder import (
    UNDERNEATH,
    AuditNotWritten,
    Record,
    Recording,
    append,
    audited,
    changed,
    failure_line,
    recorded,
    recording,
    started,
    touch,
    within_open,
)

__all__ = [
    "COLUMNS",
    "DATA_ARGS",
    "DONE_WORDS",
    "FIELDS",
    "FIRST_IDS",
    "FIRST_PAGE",
    "KEEP",
    "MAX_ARG",
    "MAX_READ",
    "MAX_TEXT",
    "PAGE_MOST",
    "SCAN_COUNT",
    "STARTED",
    "SURFACES",
    "UNDERNEATH",
    "AuditNotWritten",
    "Record",
    "Recording",
    "Said",
    "acl_user",
    "append",
    "audited",
    "because",
    "changed",
    "clipped",
    "current_surface",
    "digest",
    "entry_order",
    "failure_line",
    "identity",
    "ids_field",
    "in_surface",
    "notebook",
    "options",
    "outcome_of",
    "read",
    "reason_of",
    "recorded",
    "recording",
    "runbook",
    "set_default_surface",
    "set_notebook",
    "started",
    "storable",
    "streams",
    "surface",
    "touch",
    "touched",
    "typed",
    "who",
    "within_open",
    "written",
]
