"""The README's ACL user (`~emq:*` keys, `&emq:*` channels) on a real Valkey, and its URL
with a password."""

from collections.abc import Iterator
from typing import Any

import pytest
import redis

SECRET = "pw-7Hq2-never-shown"
USER = "operator"
# the README's line, byte for byte (tests/test_readme.py checks it is there)
ACL = [
    "ACL",
    "SETUSER",
    USER,
    "on",
    f">{SECRET}",
    "resetkeys",
    "~emq:*",
    "resetchannels",
    "&emq:*",
    "+@all",
    "-@dangerous",
]


@pytest.fixture
def operator_url(valkey: Any) -> Iterator[str]:
    admin_client = redis.Redis(port=valkey.port, decode_responses=True)
    admin_client.flushall()
    admin_client.execute_command(*ACL)
    yield f"redis://{USER}:{SECRET}@127.0.0.1:{valkey.port}/0"
    admin_client.execute_command("ACL", "DELUSER", USER)
