"""The operator's settings: thresholds, limits and defaults the verbs read.

Each setting is declared once, as a field of `Settings` with its default (from
`defaults.py`), its help and its check. In a notebook each is a traitlet of the
magics class built from that field (`%config EMQMagics.<name> = ...`); both the
notebook and the `emq` shell command first read `[tool.emq_notebook]` from
`pyproject.toml` in the working directory (as jupysql reads
`[tool.jupysql.SqlMagic]`), so a team can pin them per repository.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from . import defaults
from .checks import MAX_WHOLE
from .errors import BadInput

# a setting's check: its value (as the setting keeps it), or ValueError saying what it must be
Check = Callable[[Any], Any]


def _whole_from(least: int) -> Check:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_WHOLE:
            raise ValueError(f"is a whole number from {least}")
        return value

    return check


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.1 <= value <= 3600:
        raise ValueError("is a number of seconds from 0.1 to 3600")
    return float(value)


def _executor(value: Any) -> str:
    if value not in defaults.EXECUTORS:
        raise ValueError(f"is one of {', '.join(defaults.EXECUTORS)}")
    return str(value)


def _label(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip() or not value.isprintable()):
        raise ValueError("is a short printable word or None")
    return value


def _reason(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > 1000 or not value.isprintable()):
        raise ValueError("is one line of text (at most 1,000 characters) or None")
    return value or None


def setting(default: Any, help: str, check: Check, choices: tuple[str, ...] = ()) -> Any:
    """A field of `Settings`: its default, the help `%config EMQMagics` shows, its check
    and (for a word) the words it takes."""
    return field(default=default, metadata={"help": help, "check": check, "choices": choices})


@dataclass
class Settings:
    confirm_above: int = setting(
        defaults.CONFIRM_ABOVE, "a destructive command on more jobs asks for --yes", _whole_from(0)
    )
    default_limit: int = setting(
        defaults.DEFAULT_LIMIT, "rows a listing verb shows without --limit (0: all)", _whole_from(0)
    )
    budget: int = setting(
        defaults.DEFAULT_BUDGET,
        "jobs per bounded call of drain, obliterate, reprocess (a reprocess: at most its own default)",
        _whole_from(1),
    )
    refresh_s: float = setting(defaults.REFRESH_S, "the panels' auto-refresh interval (seconds)", _seconds)
    executor: str = setting(
        "script", "the executor of a connection opened without --executor", _executor, defaults.EXECUTORS
    )
    env: str | None = setting(None, "the env label of a new connection", _label)
    audit_keep: int = setting(
        defaults.AUDIT_KEEP, "audit entries kept per queue (emq:audit:{q}, MAXLEN ~)", _whole_from(1)
    )
    reason: str | None = setting(
        None, "the session's reason, in every audit entry (%emq reason TEXT; --reason for one)", _reason
    )

    def update(self, values: dict[str, Any], where: str = "settings") -> Settings:
        """Set each of `values` after checking it; an unknown name or a bad value is
        `BadInput` naming `where`."""
        for name, value in values.items():
            if name not in NAMES:
                raise BadInput(f"{where}: unknown setting {name!r}; known: {', '.join(sorted(NAMES))}")
            setattr(self, name, check(name, value, where))
        return self


# the settings' names, in declaration order
NAMES = tuple(f.name for f in fields(Settings))


def check(name: str, value: Any, where: str = "settings") -> Any:
    """`value` when it suits setting `name`, else `BadInput` naming `where`."""
    declared = next(f for f in fields(Settings) if f.name == name)
    try:
        return declared.metadata["check"](value)
    except ValueError as why:
        raise BadInput(f"{where}: {name} {why}, not {value!r}") from None


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
