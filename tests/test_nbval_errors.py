"""A broken %emq line must FAIL its runbook under nbval; a refusal must not.

nbval only sees iopub `error` messages; IPython's plain UsageError sends none,
so our errors are EMQErrors with `_render_traceback_`, which nbval reports as a
failed cell.
"""

import pytest
from nbtools import execute, nbval, notebook

LOAD = "%load_ext emq_notebook"


@pytest.mark.parametrize(
    "line",
    [
        "%emq frobnicate somequeue",  # unknown verb
        "%emq drain somequeue --bogus-option",  # bad option
        "%emq enqueue somequeue '{}' --delay soon",  # bad duration
        "%emq data somequeue j_1 '{broken'",  # bad JSON
        "%emq pause bad:queue",  # invalid name
    ],
)
def test_a_broken_line_fails_nbval(tmp_path, line):
    nb = notebook(tmp_path / "broken.ipynb", LOAD, "%emq connect --embedded fake", line)
    run = nbval(nb, "--nbval-lax")
    assert run.returncode != 0, run.stdout
    assert (
        "EMQError" in run.stdout
        or "Problem" in run.stdout
        or "InvalidName" in run.stdout
        or "BadInput" in run.stdout
    ), run.stdout[-3000:]


def test_a_verb_on_an_unreachable_server_fails_nbval(tmp_path):
    # the URL comes from EMQ_URL, so the secret is in no cell source nbval echoes
    nb = notebook(tmp_path / "down.ipynb", LOAD, "%emq connect")
    run = nbval(nb, "--nbval-lax", env={"EMQ_URL": "redis://:sekrit@127.0.0.1:1/0"})
    assert run.returncode != 0
    assert "WireError" in run.stdout and "sekrit" not in run.stdout


def test_the_error_shows_one_line_without_a_traceback(tmp_path):
    nb = notebook(tmp_path / "one.ipynb", LOAD, "%emq frobnicate q")
    out = execute(nb).cells[1].outputs
    assert [o.output_type for o in out] == ["error"]
    assert out[0].traceback == ["UsageProblem: unknown verb 'frobnicate' — see %emq?"]


def test_a_refusal_cell_passes_and_its_line_is_compared(tmp_path):
    cells = (
        LOAD,
        "%emq connect --embedded fake",
        "%emq enqueue mail '{}' --id j_live",
        "%emq reprocess mail j_live",
    )
    nb = notebook(tmp_path / "refusal.ipynb", *cells)
    stored = execute(nb)
    assert stored.cells[3].outputs[0].text == "refused: reprocess mail j_live — not_dead\n"
    assert nbval(nb).returncode == 0
    # change the behaviour the runbook recorded: nbval must notice
    import nbformat

    changed = nbformat.read(nb, 4)
    changed.cells[3].outputs[0].text = "reprocessed mail j_live: dead -> pending\n"
    nbformat.write(changed, nb)
    run = nbval(nb)
    assert run.returncode != 0 and "not_dead" in run.stdout


def test_a_failed_connect_stops_the_write_after_it(tmp_path):
    """ "Run all" of a notebook whose connect fails (a typo'd port, as production): the
    connect cell and the pause after it each store one error line, and the pause wrote
    nowhere. Fails before: the pause cell printed "paused mailers" (the embedded
    server's)."""
    cells = (LOAD, "%emq connect redis://127.0.0.1:1/0 --env production", "%emq pause mailers")
    nb = execute(notebook(tmp_path / "typo.ipynb", *cells), env={"EMQ_URL": ""})
    connect, pause = (cell.outputs for cell in nb.cells[1:])
    assert [o.output_type for o in connect + pause] == ["error", "error"]
    assert connect[0].traceback[0].startswith("WireError: connect failed: lost the server at ")
    assert len(pause[0].traceback) == 1
    assert (
        pause[0]
        .traceback[0]
        .startswith(
            "UsageProblem: pause mailers: no connection is current: the last connect failed "
            "(lost the server at redis://127.0.0.1:1/0: "
        )
    )
