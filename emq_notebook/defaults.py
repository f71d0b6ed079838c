"""The defaults and bounds every verb reads, named once.

A bounded call (find, errors, reprocess_dead, the filtered bulk verbs, drain,
obliterate, enqueue_many) does at most `budget` members of work a call AND reads
at most `BYTE_BUDGET` bytes of row text a call; a budget above `MAX_BUDGET` and a
glob longer than `MAX_GLOB` are refused before any I/O, because no call may hold
the server long (SPEC 11: at most 20 ms a call).
"""

from __future__ import annotations

# members examined (or jobs moved) by one bounded call, when the caller names none
DEFAULT_BUDGET = 1000
# the most a caller may ask of one call: above it one call could hold the server too long
MAX_BUDGET = 1000
# bytes of row text (error texts, payloads) one bounded call reads at most
BYTE_BUDGET = 1 << 20
# rows a listing or a search answers when the caller names no limit
DEFAULT_LIMIT = 1000
# the longest glob a search takes (characters): matching costs text length x glob length
MAX_GLOB = 1000
