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
