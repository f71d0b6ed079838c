"""The operator's settings: thresholds, limits and defaults the verbs read.

One `Settings` per front end.  In a notebook they are `%config EMQMagics.<name> =
...` (traitlets on the magics class); both the notebook and the `emq` shell command
first read `[tool.emq_notebook]` from `pyproject.toml` in the working directory
(as jupysql reads `[tool.jupysql.SqlMagic]`), so a team can pin them per repository.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .checks import MAX_WHOLE
from .errors import BadInput

EXECUTORS = ("script", "function", "native")


@dataclass
class Settings:
    # a destructive command on more jobs than this asks for --yes, stating the count
    confirm_above: int = 1000
    # rows a listing verb (`jobs`) shows unless given --limit (0: all)
    default_limit: int = 1000
    # jobs per bounded call of drain, obliterate and bulk reprocess unless given --budget
    budget: int = 1000
    # the panels' auto-refresh interval, in seconds
    refresh_s: float = 2.0
    # the executor of a connection opened without --executor
    executor: str = "script"
    # the env label of a connection opened without --env ("production", or None)
    env: str | None = None

    def update(self, values: dict[str, Any], where: str = "settings") -> Settings:
        """Set each of `values` after checking it; an unknown name or a bad value is
        `BadInput` naming `where`."""
        known = {f.name for f in fields(self)}
        for name, value in values.items():
            if name not in known:
                raise BadInput(f"{where}: unknown setting {name!r}; known: {', '.join(sorted(known))}")
            setattr(self, name, check(name, value, where))
        return self


def check(name: str, value: Any, where: str = "settings") -> Any:
    """`value` when it suits setting `name`, else `BadInput`."""

    def bad(why: str) -> BadInput:
        return BadInput(f"{where}: {name} {why}, not {value!r}")

    if name in ("confirm_above", "default_limit", "budget"):
        least = 1 if name == "budget" else 0
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_WHOLE:
            raise bad(f"is a whole number from {least}")
    elif name == "refresh_s":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.1 <= value <= 3600:
            raise bad("is a number of seconds from 0.1 to 3600")
        value = float(value)
    elif name == "executor":
        if value not in EXECUTORS:
            raise bad(f"is one of {', '.join(EXECUTORS)}")
    elif name == "env":
        if value is not None and (not isinstance(value, str) or not value.strip() or not value.isprintable()):
            raise bad("is a short printable word or None")
    return value


def from_pyproject(directory: Path | str | None = None) -> dict[str, Any]:
    """`[tool.emq_notebook]` of `pyproject.toml` in `directory` (the working directory),
    checked; {} when there is no such file or section."""
    path = Path(directory or Path.cwd()) / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{path}: cannot read it: {exc}") from None
    section = data.get("tool", {}).get("emq_notebook", {})
    if not isinstance(section, dict):
        raise BadInput(f"{path}: [tool.emq_notebook] is a table")
    Settings().update(section, where=f"{path} [tool.emq_notebook]")
    return section


def load(directory: Path | str | None = None) -> Settings:
    """The defaults, overridden by the working directory's pyproject section."""
    return Settings().update(from_pyproject(directory))
