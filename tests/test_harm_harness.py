"""The harm harness itself: a call that never returns fails its test and the private
server is killed; a server that dies under a call fails it too."""

from __future__ import annotations

import pytest
from harm import alive, bounded, commands_sent

import emq_notebook as emq


def test_a_script_that_never_returns_fails_the_test_and_the_server_is_killed(private_valkey):
    conn = emq.connect(f"redis://127.0.0.1:{private_valkey.port}/0")
    with pytest.raises(pytest.fail.Exception, match="did not return within 2 s; the server was killed"):
        bounded(lambda: conn.client.eval("while true do end", 0), private_valkey, seconds=2)
    assert not alive(private_valkey)


def test_a_call_that_returns_answers_its_value_and_counts_its_commands(private_valkey):
    conn = emq.connect(f"redis://127.0.0.1:{private_valkey.port}/0")
    assert bounded(lambda: conn.client.ping(), private_valkey) is True
    sent = commands_sent(conn.client, lambda: [conn.client.get("k") for _ in range(3)])
    assert sent == {"get": 3}
