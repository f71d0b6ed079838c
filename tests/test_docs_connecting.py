"""docs/connecting.md runs as written: every python block, statement after statement in
the session's IPython shell, on both backends; a comment that states an answer (a
value, or a printed line with `...`) is checked (`as_written.answered`)."""

from __future__ import annotations

import pytest
from as_written import answered, default_server, statements, typed
from documentation import PAGES, blocks

BLOCKS = blocks(PAGES["connecting.md"])


def test_the_page_shows_python_blocks():
    """(Without one, the parametrized test below would run nothing.)"""
    assert BLOCKS


@pytest.mark.parametrize("at", range(len(BLOCKS)))
def test_each_python_block_runs_as_written(ip, conn, monkeypatch, capfd, at):
    """Fails before #41.5: the page's first example was `connect()` with no import
    (NameError), and no test ran the page."""
    default_server(conn, monkeypatch)
    checked = 0
    for statement in statements(BLOCKS[at]):
        result, out, comment = typed(ip, capfd, statement)
        assert result.error_before_exec is None and result.error_in_exec is None, (statement, out)
        verdict = answered(result, out, comment)
        assert verdict is not False, (statement, comment, result.result, out)
        checked += verdict is True
    assert checked >= 4
