"""How text from the server is decoded, and how it is shown.

The policy: every client decodes replies as UTF-8 with `surrogateescape`, so a
row written by another client with bytes that are not UTF-8 (`b"\\xff\\xfe"`)
reads without an error and writes back byte for byte (`update_data` with the
text read restores the same bytes).  Anything shown to a person (a printed
line, a panel, a frame's HTML) goes through `printable`, which writes each such
byte as `\\xNN`, so a display never fails on it either; `visible` writes a
control character (a NUL, an escape) the same way, where a person reads it.

A frame keeps the text as read, so a value taken from it writes back the same
bytes.  A new text column built from such text cannot be Arrow-backed (Arrow
holds UTF-8 only): `text_dtype` names its dtype, `object` when a value holds such
a byte.  In IPython, a frame is shown through `visible` (`magics.show_frames`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import BadInput

ERRORS = "surrogateescape"
# the code points surrogateescape decodes an undecodable byte to
_ESCAPED = re.compile("[\udc80-\udcff]")
# any other surrogate: half of a character pair (pasted cut, or built by code), which
# no encoding writes and no server can hold
LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
# what a display would act on or drop rather than show: C0 controls but tab and newline, DEL,
# the C1 controls (a terminal may read 0x9b as an escape sequence's start) and the Unicode
# line and paragraph separators (a line break to a browser and to `str.splitlines`)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def clipped(text: str, most: int) -> str:
    """`text` whole up to `most` characters, else its first `most` and "…"."""
    return text if len(text) <= most else text[:most] + "…"


def printable(value: object) -> str:
    """`value` as text safe to show: undecodable bytes as `\\xNN`, the rest as is (the
    same text the events' UTF-8 repair writes, lua/includes/common.lua `utf8_text`)."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() or not _ESCAPED.search(text):
        return text
    return text.encode("utf-8", ERRORS).decode("utf-8", "backslashreplace")


def visible(value: object) -> str:
    """`printable`, and each control character but a tab or a newline (a NUL, an
    escape, a carriage return, a C1 control) as `\\xNN` too, a line separator as
    `\\u2028`: what a person reads in a panel, a frame or a terminal, where such a
    character would vanish or act on the display."""
    return _CONTROL.sub(_shown_control, printable(value))


def _shown_control(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# what breaks a line or acts on a display, a newline and a tab included: every C0 and C1
# control character, DEL, and the Unicode line and paragraph separators (each a line
# break to `str.splitlines` and to a terminal or a browser)
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def one_line(value: object) -> str:
    """`printable`, on one line whatever it holds: a newline as the two characters `\\n`
    (a carriage return `\\r`, a tab `\\t`), any other control character or line
    separator as `\\xNN` or `\\uNNNN`. A value of a table row or a listing line that
    another client's text can never break into two (a forged row)."""
    text = printable(value)
    return text if text.isprintable() else _BREAKS.sub(_escaped, text)


def wire(value: str) -> str | bytes:
    """`value` as it goes to the server: text holding undecodable bytes (read under
    this policy) becomes those bytes again; any other text is sent as is.

    Done here because the hiredis command packer encodes text strictly and would
    refuse the surrogates that `ERRORS` decoded them to. Text holding any other
    surrogate (half of a pair) is refused, `BadInput`, before anything is sent.
    """
    # ASCII first: the common case, checked at C speed (a bulk call sends millions)
    if value.isascii():
        return value
    lone = LONE_SURROGATE.search(value)
    if lone:
        raise BadInput(
            f"{printable(value[max(0, lone.start() - 20) : lone.start()])!r} is followed by half of "
            f"a character pair (U+{ord(lone.group()):04X}, a lone surrogate): no server can store it"
        )
    if not _ESCAPED.search(value):
        return value
    return value.encode("utf-8", ERRORS)


def wire_size(value: str) -> int:
    """The bytes `value` takes on the wire (`wire`: an undecodable byte read from the
    server is one byte; any other character its UTF-8). A lone surrogate: `BadInput`."""
    if value.isascii():
        return len(value)
    raw = wire(value)
    return len(raw) if isinstance(raw, bytes) else len(raw.encode())


def batch(texts: Sequence[str], start: int, most: int, budget: int, weight: int = 1) -> list[str]:
    """The texts from `start` that one call is sent: at most `most`, and about `budget`
    bytes, each text counted `weight` times its bytes on the wire (`wire_size`: a
    script that hashes and copies an id at each key it names counts it so), one at
    least however large."""
    chosen = texts[start : start + most]
    # a character is 4 bytes on the wire at most: most calls are decided here at C speed
    if sum(map(len, chosen)) * 4 * weight <= budget:
        return list(chosen)
    size = 0
    for k, text in enumerate(chosen):
        size += wire_size(text) * weight
        if k and size > budget:
            return list(chosen[:k])
    return list(chosen)


class NotRead(str):
    """The text a job row's field shows in place of bytes no read copies (over
    `defaults.MAX_WHOLE_FIELD`): its length, `<20,971,520 bytes: over MAX_WHOLE_FIELD,
    not read>`. A `str`, so a dict, a panel and a frame show it as any text; its class
    tells a caller that matches text (a payload glob) that the field was not read."""

    __slots__ = ()


def not_read(size: int, bound: str = "MAX_WHOLE_FIELD") -> NotRead:
    """The `NotRead` text of a field of `size` bytes, over the bound named `bound`."""
    return NotRead(f"<{size:,} bytes: over {bound}, not read>")


# a whole number as text another node wrote it: ASCII digits (`str.isdigit` takes "²",
# which int() refuses, and `int` reads other scripts' digits, which no node writes for a
# number), an optional minus where asked, at most 19 digits (a time is 13; int() refuses
# text of over 4,300)
_WHOLE = re.compile(r"[0-9]{1,19}")
_SIGNED_WHOLE = re.compile(r"-?[0-9]{1,19}")


def whole_text(value: object, *, signed: bool = False) -> int | None:
    """The whole number `value` (text read from the server) holds, or None when it holds
    none: anything but ASCII digits (a minus first when `signed`), or over 19 digits."""
    if not isinstance(value, str):
        return None
    return int(value) if (_SIGNED_WHOLE if signed else _WHOLE).fullmatch(value) else None


def undecodable(value: object) -> bool:
    """True when `value` is text holding a byte that is not UTF-8 (read under `ERRORS`)."""
    return isinstance(value, str) and not value.isascii() and _ESCAPED.search(value) is not None


def text_dtype(values: Iterable[object]) -> Any:
    """The dtype of a new text column of `values`: pandas' default (`None`, the
    Arrow-backed `str`) for plain text, `object` when one holds an undecodable byte."""
    return object if any(undecodable(v) for v in values) else None


# the longest id shown whole; a longer one (another node's) is shown by its first
# SHOWN_HEAD characters and its length, as a move reports it (lua/includes/reads.lua
# `reported_id`), so a frame holding a 1 MB id prints no 1 MB line
SHOWN_ID, SHOWN_HEAD = 256, 200


def shown_id(value: object) -> object:
    """An id as a person reads it: whole up to `SHOWN_ID` characters, else its first
    `SHOWN_HEAD` and its length in bytes (`... (69536 bytes)`)."""
    if not isinstance(value, str) or len(value) <= SHOWN_ID:
        return value
    return f"{value[:SHOWN_HEAD]}... ({len(value.encode('utf-8', ERRORS))} bytes)"


def shown_ids(frame: Any) -> Any:
    """`frame` to show: itself, or a copy whose index shows each long id clipped
    (`shown_id`); the frame keeps its ids as read."""
    index = frame.index
    try:
        longest = index.str.len().max()
    except AttributeError:  # an index that is not text (a metrics frame's minutes)
        return frame
    if not longest > SHOWN_ID:
        return frame
    return frame.set_axis([shown_id(v) for v in index], axis=0).rename_axis(index.name)
