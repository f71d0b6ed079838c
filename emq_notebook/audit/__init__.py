"""The audit trail: who did what to which queue, when, why, and what came of it.

Every operator write leaves one entry in the queue's stream `emq:audit:{q}`
(`keyspace.audit_key`: the queue's hash tag, outside `emq:{q}:*`, so the record of an
obliterate survives it), written by the transition's audited twin in the same call, or
by `XADD ... MAXLEN ~ <keep> *` after it (`append`). The stream id is the server time.

One recorder writes every entry: `audited(verb)` (a decorator of a writing verb) or
`recorded(conn, verb, queue)` (a context manager). An entry says its `outcome` (`done`,
`refused:<reason>`, `unknown` for a wire fault or an interrupt, `error`), `count` and
`ids`, `args` (never secrets) and who made it (`identity`), each value cut to size.

Nothing is written for a request refused before any write (`BadInput`, `UsageProblem`,
`InvalidName`), a read, a dry run, a read-only session, or a call nested in another
record of the same verb and queue. A failed write of the entry never hides the verb's
result nor its exception: it becomes a note, `audit_failed: <why>` (on the surface's
line, an `AuditNotWritten` warning, a note on the exception).

Its rooms, each importing only those before it: `entry`, `context` (surface, reason,
notebook), `identities`, `reading`, `recorder`.
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
