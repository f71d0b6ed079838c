"""The package's imports: no cycle among its modules, and a light `import emq_notebook`.

The graph is read from the source (ast): each module's imports at its top level (a
`try` included, an `if TYPE_CHECKING:` block left out: it never runs), each relative
or absolute import of `emq_notebook` resolved to the module it names. An import
inside a function runs at its first call and is not an edge.
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


def imports_of(name: str) -> set[str]:
    """The package's modules `name` imports at its top level."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _top_level(ast.parse(path.read_text()).body):
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


def cycles() -> list[list[str]]:
    """Every cycle found by a depth-first walk (each reported once, from where it closes)."""
    found, state = [], dict.fromkeys(GRAPH, 0)  # 0 unseen, 1 on the path, 2 done
    path: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(GRAPH[node]):
            if state[nxt] == 1:
                found.append(path[path.index(nxt) :] + [nxt])
            elif state[nxt] == 0:
                walk(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(GRAPH):
        if state[node] == 0:
            walk(node)
    return found


def test_the_graph_is_read_from_the_source():
    # the walk sees the imports the package is known to make
    assert "emq_notebook.connector" in GRAPH["emq_notebook.jobs"]
    assert "emq_notebook.health" in GRAPH["emq_notebook.frames"]
    assert "emq_notebook.verbs.bulk" in GRAPH["emq_notebook.verbs.job"]
    assert {"emq_notebook.verbs.session", "emq_notebook.verbs.panels"} <= GRAPH["emq_notebook.verbs"]
    # a TYPE_CHECKING import is no edge: directory.py names Connection only for types
    assert "emq_notebook.connector" not in GRAPH["emq_notebook.directory"]


def test_no_module_of_the_package_imports_itself_round_a_cycle():
    assert cycles() == []


def test_the_walk_finds_a_cycle_when_there_is_one(monkeypatch):
    monkeypatch.setitem(GRAPH, "emq_notebook.keyspace", {"emq_notebook.jobs"})
    assert any({"emq_notebook.jobs", "emq_notebook.keyspace"} <= set(c) for c in cycles())


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
