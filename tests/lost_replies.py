"""Replies lost after the server ran the command, injected at the client (what the soak in
tests/soak/ found), for the regression tests of each verb it hit."""

import redis as redis_py

from emq_notebook.keyspace import queue_key

Q = "soaked"


def lose_replies(conn, monkeypatch, command: str = "EVALSHA", times: int = 1) -> list:
    """The next `times` replies to `command` are lost: the server ran it, then the
    connection dropped before the answer was read (what the soak's proxy does)."""
    real = conn.client.parse_response
    lost: list = []

    def parse(connection, command_name, **options):
        reply = real(connection, command_name, **options)
        if command_name == command and len(lost) < times:
            lost.append(reply)
            connection.disconnect()
            raise redis_py.ConnectionError("injected: the connection dropped before the reply")
        return reply

    monkeypatch.setattr(conn.client, "parse_response", parse)
    return lost


def active(conn) -> list[str]:
    return conn.client.zrange(queue_key(Q, "active"), 0, -1)
