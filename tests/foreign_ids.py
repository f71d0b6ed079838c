"""Ids another node wrote long, in a queue's sets, for the cases of a move or a frame past
them."""

from dead_letters import long_ids, written_rows

from emq_notebook.keyspace import MAX_SERVER_ID

Q = "longid"


def foreign_ids(n: int) -> list[str]:
    """`n` ids another node wrote, each over MAX_SERVER_ID bytes: foreign."""
    return long_ids(n, MAX_SERVER_ID + 4_000)


def written(conn, key: str, ids: list[str], first: int = 1) -> None:
    """Rows in set `key` as another node writes them, not tried yet (a dead one too)."""
    not_tried = {"attempts": "0", "failures": None, "max_attempts": None, "last_error": None}
    written_rows(conn, Q, key, ids, first=first, **not_tried)
