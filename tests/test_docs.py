"""Docstrings and script headers stand alone: a reader of this repository needs no
file outside it, and every module says what it is in plain words."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("emq_notebook/**/*.py"), *ROOT.glob("lua/**/*.lua"), *ROOT.glob("bench/*.py")])
# a pointer out of the repository, or a word that only means something beside it
OUTSIDE = re.compile(r"\.\./shared|JUPYTER\.md|SPEC\.md|\bthe seed\b|\bseed's\b|\broom\b", re.I)


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_reference_outside_the_repository(path):
    found = [
        f"{n}: {line.strip()}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


MODULES = sorted(ROOT.glob("emq_notebook/**/*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_every_module_opens_with_a_docstring(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and len(doc.splitlines()[0]) > 10


# -- docs/reliability.md: each guarantee names the tests that hold it, and they exist ------

RELIABILITY = (ROOT / "docs" / "reliability.md").read_text()
CITED = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")


def defines(path: Path, name: str) -> bool:
    return path.is_file() and re.search(rf"^\s*(async\s+)?def {name}\(", path.read_text(), re.M) is not None


def test_every_test_reliability_md_names_is_where_it_says():
    cited = CITED.findall(RELIABILITY)
    assert len(cited) > 50
    wrong = []
    for path, name in cited:
        if not defines(ROOT / path, name):
            now = [p.name for p in sorted((ROOT / "tests").glob("test_*.py")) if defines(p, name)]
            wrong.append(f"{path}::{name} (defined in: {', '.join(now) or 'no test file'})")
    assert wrong == []


def test_every_guarantee_in_reliability_md_names_its_tests():
    guarantees = [
        item
        for part in RELIABILITY.split("\n## ")[1:]
        if not part.startswith("Running the suite")
        for item in part.split("\n- ")[1:]
    ]
    assert len(guarantees) > 20
    assert [g.split("\n", 1)[0] for g in guarantees if "Tested by `tests/" not in g] == []
