"""The README tells the truth: its verbs table is the catalogue's."""

from pathlib import Path

from emq_notebook import catalogue

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_readme_verbs_table_is_generated_from_the_catalogue():
    assert catalogue.markdown() in README


def test_readme_opens_with_the_two_commands():
    first = README.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert "emq_notebook.demo" in first[0] and "pytest" in first[1]


def test_readme_acl_line_is_the_one_tested():
    from test_secrets import ACL
    line = " ".join(ACL).replace(ACL[4], ">PASSWORD")
    assert f"`{line}`" in README
