"""Passwords out of every line shown: a URL's label, and any text a server or a
client library says about it.

A connection keeps the secrets of its URL (`secrets_of`) and scrubs them from every
error it raises; its label is the URL with each one replaced by `***` (`redact`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence

# query-string parameters that carry a secret (redis-py reads `password` from the query)
_SECRET_PARAMS = ("password", "pass", "passwd", "pwd", "secret", "token", "auth")


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
    """Every secret written in `url`, raw and percent-decoded, longest first (for scrubbing)."""
    _, netloc, _, query = _split(url)
    found: set[str] = set()
    userinfo, at, _ = netloc.rpartition("@")
    if at and ":" in userinfo:
        found.add(userinfo.split(":", 1)[1])
    for pair in query.split("#", 1)[0].split("&") if query else []:
        name, eq, value = pair.partition("=")
        if eq and _is_secret_param(name):
            found.add(value)
    found |= {urllib.parse.unquote_plus(v) for v in found} | {urllib.parse.unquote(v) for v in found}
    return tuple(sorted((v for v in found if v), key=len, reverse=True))


def scrub(text: str, secrets: Sequence[str]) -> str:
    """`text` with each of `secrets` replaced by `***` (the longest first: `secrets_of`'s order)."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
