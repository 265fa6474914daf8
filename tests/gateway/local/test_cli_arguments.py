"""``tomc run claude|codex ARGS...`` passes ARGS as typed (issue 33): click's ``main()``
expands ``%VAR%``, ``$VAR``, ``~`` and globs in ``sys.argv`` on Windows unless told not to,
and the ``tomc`` console script calls it with no arguments.

Off Windows click expands nothing, so its check of the platform (``os.name`` in
``click.core``) is made to read ``"nt"``: the expansion then runs here as it would there
(``os.path`` of this platform: ``$VAR`` and ``~`` on Linux, ``%VAR%`` too on Windows).
"""

from __future__ import annotations

import os
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from types import SimpleNamespace

import click.core
import pytest

from tomc._gateway.local import launcher

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
ARGS = ["-p", "~", "~/notes.txt", "$TOMC_TEST_VAR", "${TOMC_TEST_VAR}", "%TOMC_TEST_VAR%", "*.txt"]


@pytest.fixture
def windows_click(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, list[str]]]:
    """click as on Windows; ``run_agent`` records what it was asked to run."""
    monkeypatch.setattr(click.core, "os", SimpleNamespace(**{**vars(os), "name": "nt"}))
    monkeypatch.setenv("TOMC_TEST_VAR", "expanded")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("", "utf-8")
    calls: list[tuple[str, list[str]]] = []

    def run_agent(client: str, args: tuple[str, ...], **options: object) -> int:
        calls.append((client, list(args)))
        return 0

    monkeypatch.setattr(launcher, "run_agent", run_agent)
    return calls


def test_click_would_expand_them(windows_click: list, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check is real: a plain click group on "Windows" does change the arguments."""
    seen: list[list[str]] = []

    @click.command(context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def plain(args: tuple[str, ...]) -> None:
        seen.append(list(args))

    monkeypatch.setattr(sys, "argv", ["plain", *ARGS])
    with pytest.raises(SystemExit):
        plain.main()
    assert seen and seen[0] != ARGS
    assert "a.txt" in seen[0] and "expanded" in seen[0]


@pytest.mark.parametrize("how", ["console script", "python -m tomc"])
def test_tomc_run_passes_the_agents_arguments_as_typed(
    windows_click: list, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "console script":
        # What the installed `tomc` calls, with no arguments: pyproject.toml's [project.scripts]
        # (read there: the Windows runtime imports the checkout without installing it).
        scripts = tomllib.loads(PYPROJECT.read_text("utf-8"))["project"]["scripts"]
        main = EntryPoint("tomc", scripts["tomc"], "console_scripts").load()
    else:
        from tomc._cli import main  # what src/tomc/__main__.py calls
    monkeypatch.setattr(sys, "argv", ["tomc", "run", "claude", *ARGS])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 0
    assert windows_click == [("claude", ARGS)]
