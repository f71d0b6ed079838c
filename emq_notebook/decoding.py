"""How text from the server is decoded, and how it is shown.

The policy: every client decodes replies as UTF-8 with `surrogateescape`, so a
row written by another client with bytes that are not UTF-8 (`b"\\xff\\xfe"`)
reads without an error and writes back byte for byte (`update_data` with the
text read restores the same bytes).  Anything shown to a person (a printed
line, a panel, a frame's HTML) goes through `printable`, which writes each such
byte as `\\xNN`, so a display never fails on it either.
"""

from __future__ import annotations

import re

ERRORS = "surrogateescape"
# the code points surrogateescape decodes an undecodable byte to
_ESCAPED = re.compile("[\udc80-\udcff]")


def printable(value: object) -> str:
    """`value` as text safe to show: undecodable bytes as `\\xNN`, the rest as is."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() or not _ESCAPED.search(text):
        return text
    return text.encode("utf-8", ERRORS).decode("utf-8", "backslashreplace")


def wire(value: str) -> str | bytes:
    """`value` as it goes to the server: text holding undecodable bytes (read under
    this policy) becomes those bytes again; any other text is sent as is.

    Done here because the hiredis command packer encodes text strictly and would
    refuse the surrogates that `ERRORS` decoded them to.
    """
    # ASCII first: the common case, checked at C speed (a bulk call sends millions)
    if value.isascii() or not _ESCAPED.search(value):
        return value
    return value.encode("utf-8", ERRORS)
