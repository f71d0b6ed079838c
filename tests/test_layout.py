"""The tests mirror the modules (rq's habit): each module's tests are in one file named
after it, so a reader finds a module's tests, hostile and harm cases included, in one
place.

The scheme: `emq_notebook/<module>.py` is tested in `tests/test_<module>.py`, a module of
a subpackage `emq_notebook/<package>/<module>.py` in `tests/test_<package>_<module>.py`
(`test_audit_recorder.py`, `test_verbs_bulk.py`, `test_widgets_audit_view.py`), and a
subpackage's `__init__.py` in `tests/test_<package>.py`. Every other test file is in
CROSS_CUTTING with the reason it tests no one module, and every module without a file
of its own is in TESTED_THROUGH with the file that tests it.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# test files that test no one module, each with why
CROSS_CUTTING = {
    "test_bench.py": "runs every bench/ script on a small queue",
    "test_browser.py": "the panels in a real browser (JupyterLab, Chromium)",
    "test_browser_dead_letters.py": "the dead letters of the dashboard in a real browser (Voila, Chromium)",
    "test_browser_incident.py": "the dashboard at 1,000 queues in a real browser (Voila, JupyterLab)",
    "test_cluster.py": "what only a Valkey Cluster has, across the verbs",
    "test_demos.py": "the live demos (ClaimGate, OperatorConsole) driven as a reader does",
    "test_docs.py": "every docstring and script header, and docs/reliability.md's citations",
    "test_docs_audit.py": "docs/audit.md run as written",
    "test_docs_connecting.py": "docs/connecting.md run as written",
    "test_docs_monitoring.py": "docs/monitoring.md run as written",
    "test_faults.py": "a server killed in the middle of every bounded verb",
    "test_harm_harness.py": "the harm harness itself (tests/harm.py)",
    "test_imports.py": "the package's import graph and its warnings",
    "test_layout.py": "this file: the tests' layout",
    "test_model.py": "a model of the queue against every operator verb",
    "test_nbval_errors.py": "runbooks failing under nbval",
    "test_readme.py": "the README run as written",
    "test_runbooks.py": "the shipped demo notebooks against a real Valkey",
    "test_runbooks_live.py": "the runbooks on staged incidents",
    "test_soak.py": "the soak, every fault at once",
}

# modules with no test file of their own, each with the file that tests it
TESTED_THROUGH = {
    "emq_notebook/__init__.py": "test_imports.py",
    "emq_notebook/audit/context.py": "test_audit.py",
    "emq_notebook/audit/identities.py": "test_audit_entry.py",
    "emq_notebook/catalogue.py": "test_registry.py",
    "emq_notebook/counts.py": "test_lanes.py",
    "emq_notebook/defaults.py": "test_moves.py",
    "emq_notebook/errors.py": "test_checks.py",
    "emq_notebook/events.py": "test_jobs.py",
    "emq_notebook/footprint.py": "test_jobs.py",
    "emq_notebook/histogram.py": "test_health.py",
    "emq_notebook/local_valkey.py": "test_faults.py",
    "emq_notebook/scripts.py": "test_transitions.py",
    "emq_notebook/verbs/__init__.py": "test_registry.py",
    "emq_notebook/verbs/monitor.py": "test_monitor.py",
    "emq_notebook/verbs/panels.py": "test_magics.py",
    "emq_notebook/verbs/queue.py": "test_transitions.py",
    "emq_notebook/verbs/trail.py": "test_audit.py",
    "emq_notebook/verbs/transfer.py": "test_transfer.py",
    "emq_notebook/widgets/__init__.py": "test_widgets_base.py",
    "emq_notebook/widgets/claim_gate.py": "test_demos.py",
    "emq_notebook/widgets/grid.py": "test_widgets_job_grid.py",
    "emq_notebook/widgets/lanes_view.py": "test_widgets_dashboard.py",
    "emq_notebook/widgets/operator_console.py": "test_demos.py",
    "emq_notebook/widgets/presence.py": "test_widgets_dashboard.py",
}


def file_for(module: str) -> str:
    """`emq_notebook/verbs/bulk.py` -> `test_verbs_bulk.py`; a package's `__init__.py` is
    the package (`test_audit.py`); the top package's has no name (`test_.py`)."""
    parts = Path(module).relative_to("emq_notebook").with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return "test_" + "_".join(parts) + ".py"


def mentions(text: str, module: str) -> bool:
    """A file tests a module it names: by its name, its class's (`claim_gate`, `ClaimGate`)
    or one of the functions and classes it defines (`audit.surface` for `audit/context.py`)."""
    stem = Path(module).stem if Path(module).stem != "__init__" else Path(module).parent.name
    names = {stem, "".join(word.capitalize() for word in stem.split("_"))}
    source = ROOT / module
    if source.is_file():
        tree = ast.parse(source.read_text())
        names |= {
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
        }
    return any(re.search(rf"\b{name}\b", text) for name in names)


def problems(tests: dict[str, str], modules: list[str]) -> list[str]:
    """What is out of place, given the test files (name -> text) and the modules (paths)."""
    found = []
    named = {file_for(m): m for m in modules}
    for name in sorted(tests):
        if name not in named and name not in CROSS_CUTTING:
            found.append(f"{name}: tests no module by its name, and is not in CROSS_CUTTING")
    for name in sorted(CROSS_CUTTING):
        if name not in tests:
            found.append(f"{name}: in CROSS_CUTTING, but there is no such file")
        elif name in named:
            found.append(f"{name}: in CROSS_CUTTING, but it is {named[name]}'s own file")
    for module in sorted(modules):
        own = file_for(module)
        through = TESTED_THROUGH.get(module)
        if own in tests:
            if through:
                found.append(f"{module}: has {own}, so it is not TESTED_THROUGH {through}")
        elif through is None:
            found.append(f"{module}: no {own}, and not in TESTED_THROUGH")
        elif through not in tests:
            found.append(f"{module}: TESTED_THROUGH {through}, but there is no such file")
        elif not mentions(tests[through], module):
            found.append(f"{module}: TESTED_THROUGH {through}, which never names it")
    for module in sorted(set(TESTED_THROUGH) - set(modules)):
        found.append(f"{module}: in TESTED_THROUGH, but there is no such module")
    return found


def test_every_test_file_is_a_modules_or_cross_cutting_and_every_module_has_its_tests():
    tests = {p.name: p.read_text() for p in (ROOT / "tests").glob("test_*.py")}
    modules = [str(p.relative_to(ROOT)) for p in (ROOT / "emq_notebook").rglob("*.py")]
    assert len(tests) > 40 and len(modules) > 40
    assert problems(tests, modules) == []


def test_a_campaign_file_or_a_module_without_tests_is_found():
    tests = {p.name: p.read_text() for p in (ROOT / "tests").glob("test_*.py")}
    modules = [str(p.relative_to(ROOT)) for p in (ROOT / "emq_notebook").rglob("*.py")]
    tests["test_hostile_round3.py"] = ""
    modules.append("emq_notebook/verbs/newverb.py")
    del tests["test_jobs.py"]
    assert problems(tests, modules) == [
        "test_hostile_round3.py: tests no module by its name, and is not in CROSS_CUTTING",
        "emq_notebook/events.py: TESTED_THROUGH test_jobs.py, but there is no such file",
        "emq_notebook/footprint.py: TESTED_THROUGH test_jobs.py, but there is no such file",
        "emq_notebook/jobs.py: no test_jobs.py, and not in TESTED_THROUGH",
        "emq_notebook/verbs/newverb.py: no test_verbs_newverb.py, and not in TESTED_THROUGH",
    ]


def test_the_scheme_names_a_subpackages_module_by_its_package():
    assert file_for("emq_notebook/jobs.py") == "test_jobs.py"
    assert file_for("emq_notebook/verbs/bulk.py") == "test_verbs_bulk.py"
    assert file_for("emq_notebook/audit/__init__.py") == "test_audit.py"
