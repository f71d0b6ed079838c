"""Settings: defaults, `[tool.emq_notebook]` in the working directory's pyproject.toml,
and `%config EMQMagics.*` on top."""

import pytest

from emq_notebook import magics, settings
from emq_notebook.errors import BadInput


def test_the_defaults():
    s = settings.Settings()
    assert (s.confirm_above, s.default_limit, s.budget, s.refresh_s, s.executor, s.env) == (
        1000,
        1000,
        1000,
        2.0,
        "script",
        None,
    )


def test_pyproject_section_is_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "ops"\n\n[tool.emq_notebook]\nconfirm_above = 3\ndefault_limit = 50\n'
        'budget = 200\nrefresh_s = 5\nexecutor = "function"\nenv = "production"\n'
    )
    s = settings.load(tmp_path)
    assert (s.confirm_above, s.default_limit, s.budget, s.refresh_s, s.executor, s.env) == (
        3,
        50,
        200,
        5.0,
        "function",
        "production",
    )
    assert settings.load(tmp_path / "nowhere") == settings.Settings()


@pytest.mark.parametrize(
    "body,why",
    [
        ("confirm_above = -1", "confirm_above is a whole number"),
        ("budget = 0", "budget is a whole number from 1"),
        ("default_limit = 2.5", "default_limit is a whole number"),
        ("refresh_s = 0", "refresh_s is a number of seconds"),
        ("executor = 'lua'", "executor is one of script, function, native"),
        ("env = ''", "env is a short printable word"),
        ("budgit = 5", "unknown setting 'budgit'"),
    ],
)
def test_a_bad_pyproject_value_is_one_line(tmp_path, body, why):
    (tmp_path / "pyproject.toml").write_text(f"[tool.emq_notebook]\n{body}\n")
    with pytest.raises(BadInput, match=why) as info:
        settings.load(tmp_path)
    assert "pyproject.toml [tool.emq_notebook]" in str(info.value)


def test_a_broken_pyproject_is_one_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.emq_notebook\n")
    with pytest.raises(BadInput, match="cannot read it"):
        settings.load(tmp_path)


def test_the_magics_read_pyproject_then_config(ip, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.emq_notebook]\ndefault_limit = 7\nenv = 'staging'\n")
    monkeypatch.chdir(tmp_path)
    # a %config from an earlier test would rightly win over pyproject: start without one
    monkeypatch.delitem(ip.config, "EMQMagics", raising=False)
    saved = magics.SESSION.settings
    magics.SESSION.settings = settings.Settings()
    try:
        m = magics.EMQMagics(shell=ip)
        assert m.default_limit == 7 and magics.SESSION.settings.default_limit == 7
        assert magics.SESSION.settings.env == "staging"
        m.default_limit = 9  # what %config does
        assert magics.SESSION.settings.default_limit == 9
    finally:
        magics.SESSION.settings = saved


def test_config_is_how_ipython_sets_them(ip):
    ip.run_line_magic("config", "EMQMagics.refresh_s = 4.5")
    try:
        assert magics.SESSION.settings.refresh_s == 4.5
    finally:
        ip.run_line_magic("config", "EMQMagics.refresh_s = 2.0")
    assert magics.SESSION.settings.refresh_s == 2.0
