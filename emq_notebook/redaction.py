"""Passwords out of every line shown or recorded: a URL's label, and any text a
server, a client library or an operator gives.

A connection's label is its URL with each password replaced by `***` (`redact`). It
keeps the secrets of its URL (`secrets_of`), and every text it shows or records goes
through `scrub`, the one redaction of a text: the password of each URL written in it
and each of those secrets.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence

# query-string parameters that carry a secret (redis-py reads `password` from the query)
_SECRET_PARAMS = ("password", "pass", "passwd", "pwd", "secret", "token", "auth")


# a text's words and the blanks between them (kept): a URL in a text ends at a blank
_WORDS = re.compile(r"(\s+)")


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme://, netloc, path, query) by hand: never raises, whatever the URL."""
    head, sep, rest = url.partition("://")
    if not sep:
        head, rest = "", url
    else:
        head += sep
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0] or [len(rest)])
    netloc, tail = rest[:cut], rest[cut:]
    path, _, query = tail.partition("?")
    return head, netloc, path, query


def _is_secret_param(name: str) -> bool:
    name = urllib.parse.unquote_plus(name).lower()
    return any(word in name for word in _SECRET_PARAMS)


def redact(url: str) -> str:
    """The URL with every password replaced by `***`: the user part's and any
    query-string credential (`?password=...`). Never fails, even on a malformed URL."""
    head, netloc, path, query = _split(url)
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    if query:
        fragment = ""
        if "#" in query:
            query, fragment = query.split("#", 1)
            fragment = "#" + fragment
        pairs = []
        for pair in query.split("&"):
            name, eq, value = pair.partition("=")
            pairs.append(f"{name}=***" if eq and value and _is_secret_param(name) else pair)
        query = "?" + "&".join(pairs) + fragment
    return head + netloc + path + query


def secrets_of(url: str) -> tuple[str, ...]:
    """Every secret written in `url`, raw and percent-decoded, longest first (for scrubbing);
    of a text holding several URLs (a shell word with blanks in it), each URL's."""
    found = _secrets(url)
    if url.count("://") > 1:
        for word in _WORDS.split(url):
            if "://" in word:
                found |= _secrets(word)
    return tuple(sorted((v for v in found if v), key=len, reverse=True))


def _secrets(url: str) -> set[str]:
    _, netloc, _, query = _split(url)
    found: set[str] = set()
    userinfo, at, _ = netloc.rpartition("@")
    if at and ":" in userinfo:
        found.add(userinfo.split(":", 1)[1])
    for pair in query.split("#", 1)[0].split("&") if query else []:
        name, eq, value = pair.partition("=")
        if eq and _is_secret_param(name):
            found.add(value)
    return found | {urllib.parse.unquote_plus(v) for v in found} | {urllib.parse.unquote(v) for v in found}


def scrub(text: str, secrets: Sequence[str] = ()) -> str:
    """`text` with every password out, the one redaction of any text shown or recorded
    (an error's line, an audit entry's reason, args and identity): the password of each
    URL written in it, wherever (`redact` of each word holding `://`: "failing over to
    redis://admin:***@replica/0"), then each of `secrets` (the longest first:
    `secrets_of`'s order) as `***`. Linear in the text's length."""
    if "://" in text:
        text = "".join(redact(word) if "://" in word else word for word in _WORDS.split(text))
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
