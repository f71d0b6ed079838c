"""docs/audit.md (the README's "The audit trail") runs as written, block after block
in one namespace, on both backends; its answers are the ones it states."""

from __future__ import annotations

from pathlib import Path

from documentation import PAGES, blocks

BLOCKS = blocks(PAGES["audit.md"])


def test_the_audit_trail_section_runs_as_written(conn, backend, request, monkeypatch):
    from helpers import server_for, server_url

    url = server_url(backend, server_for(backend, request))
    if url:
        monkeypatch.setenv("EMQ_URL", url)
    else:
        monkeypatch.delenv("EMQ_URL", raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "jane")
    namespace: dict = {}
    answers = []
    for block in BLOCKS:
        *body, last = [line for line in block.strip().splitlines() if line.strip()]
        exec("\n".join(body), namespace)
        answers.append(eval(last.split("  #", 1)[0], namespace))
    who_paused, refused, last_hour, refused_part_way = answers
    row = who_paused.iloc[0]
    assert (row.who, row.reason) == ("jane", "bounce storm, INC-4711")
    assert refused == "refused:not_paused" and "'refused:not_paused'" in BLOCKS[1]
    assert list(last_hour.verb) == ["obliterate", "resume", "pause"]
    # a run refused part way says what it had deleted, as the page says
    said = "refused: obliterate newsletters — not_paused, after deleting 20 jobs"
    assert refused_part_way == said and f"'{said}'" in BLOCKS[3]
    closing = frames_of(namespace, "newsletters").iloc[0]
    assert (closing.verb, closing.outcome, closing["count"]) == ("obliterate", "refused:not_paused", 20)
    assert (
        "[docs/audit.md](docs/audit.md)" in (Path(__file__).resolve().parent.parent / "README.md").read_text()
    )


def frames_of(namespace: dict, q: str):
    """The page's connection's audit trail of `q`, newest first."""
    return namespace["frames"].audit(namespace["conn"], q)
