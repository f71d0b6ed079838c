"""Who makes a record: the operator (`who`), the server's ACL user, the connection's
name and env, as one entry's identity fields (`identity`); and the name each
connection gives itself to the server (`name_client`)."""

from __future__ import annotations

import functools
import getpass
import os
import socket
from typing import TYPE_CHECKING, Any

from ..keyspace import AUDIT_WHO
from ..redaction import scrub
from .context import _environ, _notebook, _process, _surface, reason_of
from .entry import MAX_ARG, MAX_TEXT, clipped

if TYPE_CHECKING:
    from ..connector import Connection

# -- identity ------------------------------------------------------------------------------------


def who() -> str:
    """The JupyterHub user (`JUPYTERHUB_USER`) when set, else `user@host` of this process.
    Self-reported: the server cannot check it (`acl_user` it can)."""
    return _environ("JUPYTERHUB_USER") or _user_at_host()


@functools.cache
def _user_at_host() -> str:
    """`user@host` of this process, asked once (a record is made on every write)."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name and no passwd entry (a bare container)
        user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


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


def _word(text: str) -> str:
    """`text` as one CLIENT SETNAME word: each character outside `!`..`~` becomes `_`."""
    return "".join(c if "!" <= c <= "~" else "_" for c in text) or "_"


def client_name(conn: Connection) -> str:
    """`emq_notebook:<who>:<conn>`, one word (`CLIENT SETNAME` refuses spaces), each
    part cut at `MAX_ARG` characters (every pooled connection sends it on connect)."""
    return f"emq_notebook:{_word(clipped(who(), MAX_ARG))}:{_word(clipped(conn.name or 'unnamed', MAX_ARG))}"


def _pools(client: Any) -> list[Any]:
    if hasattr(client, "get_nodes"):  # a cluster: each node's own pool
        return [n.redis_connection.connection_pool for n in client.get_nodes() if n.redis_connection]
    pool = getattr(client, "connection_pool", None)
    return [pool] if pool is not None else []


def name_client(conn: Connection) -> str:
    """Name this connection to the server, so `CLIENT LIST` shows who is connected from
    where: `CLIENT SETNAME emq_notebook:<who>:<conn>` now, and each pooled connection
    opened later sends it on connect (redis-py's `client_name`). Answers the name.
    Not a write to the keyspace: a read-only session names itself too. A server that
    refuses it (an ACL without `client`) leaves the connection unnamed, silently."""
    import redis

    name = client_name(conn)
    try:
        with conn.wire():
            conn.client.execute_command("CLIENT", "SETNAME", name)
    except redis.ResponseError:
        # refused: a pooled connection asking it on connect would fail whole, so none asks
        return name
    for pool in _pools(conn.client):
        pool.connection_kwargs["client_name"] = name
        for c in [*getattr(pool, "_available_connections", ()), *getattr(pool, "_in_use_connections", ())]:
            c.client_name = name
    if hasattr(conn.client, "nodes_manager"):
        conn.client.nodes_manager.connection_kwargs["client_name"] = name
    return name


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
        scrub(text, secrets) for text in (hub_user or _user_at_host(), acl, name, env, surface, path, reason)
    )
    if max(map(len, said)) <= MAX_TEXT:
        return said
    return tuple(map(clipped, said))
