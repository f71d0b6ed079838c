"""The package's imports: no cycle among its modules, and a light `import emq_notebook`.

The graph is read from the source (ast): each module's imports at its top level (a
`try` included, an `if TYPE_CHECKING:` block left out: it never runs), each relative
or absolute import of `emq_notebook` resolved to the module it names. `LAZY` adds the
imports inside functions (each runs at its function's first call): a cycle through one
is a cycle all the same, only hidden from the interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "emq_notebook"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _top_level(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported (an `if TYPE_CHECKING:` block never runs)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.Try):
            found += _top_level(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                found += _top_level(handler.body)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            found += _top_level(node.body + node.orelse)
    return found


def _anywhere(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import a module may run: at its top level and inside its functions (a lazy
    import runs at the function's first call), an `if TYPE_CHECKING:` block left out."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for other in node.orelse:
                found += _anywhere(other) if not isinstance(other, (ast.Import, ast.ImportFrom)) else [other]
        else:
            found += _anywhere(node)
    return found


def imports_of(name: str, lazy: bool = False) -> set[str]:
    """The package's modules `name` imports at its top level (`lazy`: anywhere in it)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in _anywhere(tree) if lazy else _top_level(tree.body):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in MODULES}
            continue
        if node.level:
            anchor = package.split(".")
            anchor = anchor[: len(anchor) - node.level + 1]
            source = ".".join(anchor + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:
            if f"{source}.{alias.name}" in MODULES:  # `from . import frames`
                out.add(f"{source}.{alias.name}")
            elif source in MODULES:
                out.add(source)
    out.discard(name)
    return out


GRAPH = {name: imports_of(name) for name in MODULES}
LAZY = {name: imports_of(name, lazy=True) for name in MODULES}


def tangles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The modules that import one another round a cycle: each strongly connected part
    of `graph` with more than one module (Tarjan's walk), every cycle inside one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = set()
            while True:
                member = stack.pop()
                part.add(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(part)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read_from_the_source():
    # the walk sees the imports the package is known to make
    assert "emq_notebook.connector" in GRAPH["emq_notebook.jobs"]
    assert "emq_notebook.health" in GRAPH["emq_notebook.frames"]
    assert "emq_notebook.verbs.bulk" in GRAPH["emq_notebook.verbs.job"]
    assert {"emq_notebook.verbs.session", "emq_notebook.verbs.panels"} <= GRAPH["emq_notebook.verbs"]
    # a TYPE_CHECKING import is no edge: directory.py names Connection only for types
    assert "emq_notebook.connector" not in GRAPH["emq_notebook.directory"]
    # an import inside a function is an edge of LAZY only: catalogue's __main__ block,
    # the package's `current()` reaching for magics
    assert "emq_notebook.magics" in LAZY["emq_notebook"] - GRAPH["emq_notebook"]


def test_no_module_of_the_package_imports_itself_round_a_cycle():
    assert tangles(GRAPH) == []


def test_no_cycle_either_through_an_import_inside_a_function():
    assert tangles(LAZY) == []


def test_the_bulk_moves_never_import_the_queue_scope():
    assert "emq_notebook.admin" not in LAZY["emq_notebook.moves"]


def test_the_connection_knows_nothing_of_the_audit():
    audit = {name for name in MODULES if name.startswith("emq_notebook.audit")}
    assert not LAZY["emq_notebook.connector"] & audit
    # the record is the audit's own class: it fills the connection's hook (`Carried`)
    from emq_notebook.audit import Record

    assert Record.__bases__ == (object,)


def test_the_walk_finds_a_cycle_when_there_is_one(monkeypatch):
    monkeypatch.setitem(GRAPH, "emq_notebook.keyspace", {"emq_notebook.jobs"})
    assert any({"emq_notebook.jobs", "emq_notebook.keyspace"} <= t for t in tangles(GRAPH))
    # and one closed by a lazy import (as admin -> lanes -> jobs -> admin was)
    monkeypatch.setitem(LAZY, "emq_notebook.jobs", LAZY["emq_notebook.jobs"] | {"emq_notebook.admin"})
    assert any({"emq_notebook.admin", "emq_notebook.jobs"} <= t for t in tangles(LAZY))


def test_importing_the_package_leaves_the_notebook_unloaded():
    # a Worker process imports emq_notebook: it never pays for widgets, IPython or plots
    probe = (
        "import sys, emq_notebook\n"
        "print(sorted(m for m in ('ipywidgets', 'IPython', 'matplotlib', 'emq_notebook.widgets',"
        " 'emq_notebook.magics', 'emq_notebook.runbook', 'emq_notebook.plots') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    used = "import emq_notebook as emq; print(emq.widgets.__name__, emq.runbook.__name__)"
    out = subprocess.run([sys.executable, "-c", used], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["emq_notebook.widgets", "emq_notebook.runbook"]


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.

# -- 15. the suite's own warnings show: only known third-party ones are filtered -------------


def test_the_warning_filters_hide_third_party_modules_only():
    import tomllib
    import warnings
    from pathlib import Path

    from _pytest.config import parse_warning_filter

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    filters = tomllib.loads(pyproject.read_text())["tool"]["pytest"]["ini_options"]["filterwarnings"]
    parsed = [parse_warning_filter(f, escape=False) for f in filters]
    assert parsed and all(action == "ignore" and module for action, _, _, module, _ in parsed)

    def shown(category: type[Warning], module: str) -> bool:
        with warnings.catch_warnings(record=True) as seen:
            warnings.resetwarnings()
            warnings.simplefilter("always")
            for action, message, cat, mod, lineno in reversed(parsed):
                warnings.filterwarnings(action, message, cat, mod, lineno)
            warnings.warn_explicit("a warning", category, "x.py", 1, module=module)
        return bool(seen)

    for category in (DeprecationWarning, PendingDeprecationWarning, UserWarning):
        for ours in ("emq_notebook.frames", "emq_notebook.widgets.base", "test_fenced_round2"):
            assert shown(category, ours), (category, ours)
    assert not shown(DeprecationWarning, "bqscales.traits")
    assert not shown(DeprecationWarning, "ipydatagrid.datagrid")
    assert not shown(PendingDeprecationWarning, "IPython.core.completer")
    assert shown(UserWarning, "ipydatagrid.datagrid")  # by category too: a new kind still shows
