"""The audit trail: who did what to which queue, when, why, and what came of it.

Every operator write leaves one entry in the queue's stream `emq:audit:{q}`
(`keyspace.audit_key`: the queue's hash tag, outside its footprint `emq:{q}:*`, so
the record of an obliterate survives it), written beside the transition: by the
transition's audited twin in the same call (a one-transition verb), or by
`XADD ... MAXLEN ~ <keep> *` after it (`append`). The stream id is the server time.

One recorder writes every entry: `audited(verb)` (a decorator of a writing verb
`fn(conn, q, ...)`) or `recorded(conn, verb, queue)` (a context manager). An entry
says its `outcome` (`done`, `refused:<reason>`, `unknown` for a wire fault or an
interrupt, `error`), `count` and `ids` (`touched`), `args` (the options, secrets
never) and who made it (`identity`); each value is cut to size (`MAX_TEXT`,
`MAX_ARG`), so an entry is a few KB at most.

Nothing is written for a request refused as malformed before any write (`BadInput`,
`UsageProblem`, `InvalidName`), a read, a dry run, a read-only session, or a call
nested in another record of the same verb and queue (`obliterate_all` is one entry).
A failure to write the entry never hides the verb's result nor its exception: it
becomes a one-line note, `audit_failed: <why>`, on the surface's line
(`surface(...)`'s `Said.suffix()`), as an `AuditNotWritten` warning in plain Python,
and as a note on the verb's exception.

Its rooms, each importing only those before it: `entry` (what an entry says),
`context` (the surface, the reason, the notebook), `identities` (who makes it),
`reading` (the streams and their entries, newest first), `recorder` (the one path
that writes every entry).
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
    "touched",
    "typed",
    "who",
    "within_open",
    "written",
]
