"""Checks of the values a verb is given, in one place, run before any I/O.

Whole numbers are bounded to what both ends hold exactly: Lua numbers are
doubles (exact up to 2**53) and Valkey integers are 64-bit, so `MAX_WHOLE` is
2**53 - 1.  A value outside its bounds raises `BadInput` before anything is
sent, so no script ever starts with an argument it cannot use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .decoding import clipped
from .defaults import MAX_BUDGET, MAX_MOVE_BUDGET, MAX_PAYLOAD
from .errors import BadInput, InvalidName, UsageProblem

MAX_WHOLE = 2**53 - 1
# a lease, a delay or a duration: at most a year of milliseconds
MAX_MS = 366 * 86_400_000

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?\Z")


def passes(check: Callable[[str], object], value: str) -> bool:
    """True when `check(value)` (a name gate of `keyspace`) raises no `InvalidName`."""
    try:
        check(value)
    except InvalidName:
        return False
    return True


def whole(value: object, what: str, *, least: int = 1, most: int = MAX_WHOLE) -> int:
    """`value` when it is an int (not a bool) in `[least, most]`, else `BadInput`."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise BadInput(f"{what} must be a whole number from {least:,} to {most:,}, not {value!r}")
    return value


def budget(value: object, what: str = "budget", *, most: int = MAX_BUDGET) -> int:
    """A budget: a whole number of members a call, from 1 to `most` (`MAX_BUDGET`;
    `MAX_MOVE_BUDGET` for a call that moves what it meets: `move_budget`), else
    `BadInput`: one call of a larger budget could hold the server longer than any call may."""
    return whole(value, what, most=most)


def move_budget(value: object, what: str = "budget") -> int:
    """The budget of a call that rewrites each job it moves or writes (reprocess, promote,
    expire, an enqueue_many chunk): from 1 to `MAX_MOVE_BUDGET` (`BadInput`)."""
    return budget(value, what, most=MAX_MOVE_BUDGET)


def duration_ms(text: object, what: str = "duration", *, least: int = 0, most: int = MAX_MS) -> int:
    """`250ms`, `30s`, `5m`, `1h`, `2d` (a bare number is milliseconds) -> ms, bounded."""
    m = _DURATION.match(str(text).strip())
    if not m:
        raise UsageProblem(f"bad {what} {text!r}: use e.g. 250ms, 30s, 5m, 1h")
    ms = int(float(m.group(1)) * _UNITS[m.group(2) or "ms"])
    if not least <= ms <= most:
        raise UsageProblem(f"{what} {text!r} must be from {least:,}ms to {most:,}ms")
    return ms


def json_text(text: object, what: str = "payload") -> str:
    """JSON text, returned as given (never re-encoded), else `BadInput`."""
    if not isinstance(text, str):
        raise BadInput(f"{what} is JSON text (a str), not {type(text).__name__}")
    try:
        json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{what}: malformed JSON {clipped(text, 80)!r}: {exc}") from None
    return text


def payload(value: object) -> str:
    """A payload to write: a string of at most `defaults.MAX_PAYLOAD` bytes, else
    `BadInput` (one script writing more would hold the server over 20 ms)."""
    if not isinstance(value, str):
        raise BadInput(f"a payload is a string (JSON text), not {type(value).__name__}")
    if len(value) * 4 > MAX_PAYLOAD:
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_PAYLOAD:
            raise BadInput(
                f"a payload of {size:,} bytes is over {MAX_PAYLOAD:,} (defaults.MAX_PAYLOAD): "
                "one call writing it would hold the server too long"
            )
    return value


def text(value: object, what: str) -> str:
    """Any string (a payload that need not be JSON, a log line, an error text)."""
    if not isinstance(value, str):
        raise BadInput(f"{what} is a string, not {type(value).__name__}")
    return value
