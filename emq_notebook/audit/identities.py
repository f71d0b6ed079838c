"""Who makes a record: the operator (`connector.who`), the server's ACL user, the
connection's name and env, as one entry's identity fields (`identity`)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ..connector import user_at_host
from ..decoding import clipped
from ..keyspace import AUDIT_WHO
from ..redaction import scrub
from .context import _environ, _notebook, _process, _surface, reason_of
from .entry import MAX_TEXT

if TYPE_CHECKING:
    from ..connector import Connection

_UNASKED = object()


def acl_user(conn: Connection) -> str | None:
    """The server's `ACL WHOAMI`, asked once per connection (kept on it); None where the
    server refuses or does not know the command. A wire fault is not kept: asked again."""
    known = getattr(conn, "_audit_acl_user", _UNASKED)
    if known is not _UNASKED:
        return known  # type: ignore[return-value]
    import redis

    try:
        with conn.wire():
            answer = conn.client.execute_command("ACL", "WHOAMI")
    except redis.ResponseError:
        answer = None
    conn._audit_acl_user = None if answer is None else str(answer)  # type: ignore[attr-defined]
    return conn._audit_acl_user  # type: ignore[attr-defined]


def identity(conn: Connection) -> dict[str, str]:
    """The fields saying who made a record, as the stream holds them ("" for unknown)."""
    return dict(zip(AUDIT_WHO, _who_values(conn), strict=True))


def _who_values(conn: Connection) -> tuple[str, ...]:
    """The values of `identity`, in `AUDIT_WHO`'s order, each `clipped` to `MAX_TEXT`
    (each scrubbed whole first, so no cut leaves part of a secret). What each
    comes from is read on every call; the values are worked out once for each
    different reading (`_identity_of`: a record is made on every write), but for a
    reading holding a long text, which is not kept (a 17 MB reason or connection name
    stays no longer than its call)."""
    said = _surface.get()
    texts = (
        _environ("JUPYTERHUB_USER"),
        acl_user(conn) or "",
        conn.name or "",
        conn.env or "",
        said.surface if said is not None else str(_process["surface"]),
        _notebook(),
        reason_of(conn),
    )
    if max(map(len, texts)) > MAX_TEXT:
        return _identity_of.__wrapped__(*texts, conn._secrets)
    return _identity_of(*texts, conn._secrets)


@functools.lru_cache(maxsize=64)
def _identity_of(
    hub_user: str,
    acl: str,
    name: str,
    env: str,
    surface: str,
    path: str,
    reason: str,
    secrets: tuple[str, ...],
) -> tuple[str, ...]:
    """`_who_values` of what each value comes from (the JupyterHub user, the ACL user,
    the connection's name and env, the surface, the notebook, the reason, the secrets
    every value is scrubbed of: `scrub`, as all other output, a URL's password too)."""
    said = tuple(
        scrub(text, secrets) for text in (hub_user or user_at_host(), acl, name, env, surface, path, reason)
    )
    if max(map(len, said)) <= MAX_TEXT:
        return said
    return tuple(clipped(text, MAX_TEXT) for text in said)
