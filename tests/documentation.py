"""The project's documentation as the tests read it: the README (the front door) and
the pages under docs/ it links to. A section is found by its `## ` title in whichever
page holds it, so a section can move between pages without its test changing."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PAGES = {p.name: p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}
# every page, the README first: what a claim "is in the docs" is checked against
ALL = "\n\n".join([README, *PAGES.values()])


def section(title: str) -> str:
    """The text under `## title` up to the next `## ` heading of the same page."""
    for text in (README, *PAGES.values()):
        if f"\n## {title}\n" in text:
            return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    raise LookupError(f"no section {title!r} in README.md or docs/")


def block(title: str, lang: str = "python") -> str:
    """The first ```lang block of section `title`."""
    return section(title).split(f"```{lang}", 1)[1].split("```", 1)[0]


def blocks(text: str, lang: str = "python") -> list[str]:
    """Every ```lang block of `text` (a page), in order."""
    return [part.split("```", 1)[0] for part in text.split(f"```{lang}")[1:]]
