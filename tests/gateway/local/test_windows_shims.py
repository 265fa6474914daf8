"""``tomc run`` and npm's ``.cmd`` shims (issue 33): the program behind the shim is started
directly, so that cmd.exe never parses the agent's arguments; a batch file TOMC cannot see
through gets no argument cmd.exe would act on.

The shims are the real output of npm's ``cmd-shim`` package, versions 2.1.0 to 9.0.2
(``cmd_shims/``, with how they were made); the packages they point at are laid out in a
temporary folder. Everything runs the same on Linux and on Windows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway_helpers import isolated_env
from tomc._core.errors import AgentNotFoundError, TomcError
from tomc._gateway.local import launcher
from tomc._gateway.local.windows_shims import (
    UnsafeAgentArgumentError,
    agent_argv,
    find_program,
    parse_cmd_shim,
    resolve_cmd_shim,
)

FIXTURES = Path(__file__).parent / "cmd_shims"
VERSIONS = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
#: What each fixture shim starts, from the folder of a global install.
TARGETS = {
    "codex": "node_modules/@openai/codex/bin/codex.js",
    "claude": "node_modules/@anthropic-ai/claude-code/bin/claude.exe",
    "argtool": "node_modules/argtool/bin/argtool.js",
    "envtool": "node_modules/envtool/bin/envtool.js",
}
INJECTION = 'say "hi & echo INJECTED > file'
#: Arguments cmd.exe would act on, each of which must reach the agent as it is.
SPECIAL_ARGS = [
    INJECTION,
    "%PATH%",
    "a^b",
    "left|right",
    "<in",
    "out>",
    "wow!",
    "(group)",
    "two\nlines",
]
PLAIN_ARGS = ["-p", 'say "hi" to everyone', "--model=opus", "a,b;c", "naïve 日本", ""]


def install(prefix: Path, version: str, name: str, *, local: bool = False) -> Path:
    """The packages of ``TARGETS`` under ``prefix`` and the shim ``version`` of cmd-shim wrote
    for ``name``: beside ``node_modules`` (global), or in ``node_modules/.bin`` (``local``)."""
    for target in TARGETS.values():
        path = prefix.joinpath(*target.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", "utf-8")
    folder = prefix / "node_modules" / ".bin" if local else prefix
    source = FIXTURES / version / "bin" if local else FIXTURES / version
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / f"{name}.cmd"
    shim.write_bytes((source / f"{name}.cmd").read_bytes())
    return shim


def target(prefix: Path, name: str) -> str:
    return str(prefix.joinpath(*TARGETS[name].split("/")))


def program(folder: Path, name: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"")
    return str(folder / name)


def argv_of(shim: Path, args: list[str], environ: dict[str, str]) -> list[str]:
    return agent_argv([str(shim), *args], environ, client="codex", hint_env="TOMC_CODEX_BIN")


@pytest.mark.parametrize("local", [False, True], ids=["global", "node_modules-bin"])
@pytest.mark.parametrize("version", VERSIONS)
def test_a_node_script_shim_starts_node_beside_it_with_the_script(
    tmp_path: Path, version: str, local: bool
) -> None:
    shim = install(tmp_path, version, "codex", local=local)
    node = program(shim.parent, "node.exe")
    argv = argv_of(shim, SPECIAL_ARGS, {"PATH": ""})
    assert argv == [node, target(tmp_path, "codex"), *SPECIAL_ARGS]


@pytest.mark.parametrize("version", VERSIONS)
def test_else_node_from_path_without_batch_files_or_js(tmp_path: Path, version: str) -> None:
    shim = install(tmp_path / "npm", version, "codex")
    program(tmp_path / "first", "node.js")  # npm's shims take .JS out of PATHEXT
    node = program(tmp_path / "second", "node.exe")
    environ = {"PATH": os.pathsep.join([str(tmp_path / "first"), str(tmp_path / "second")])}
    argv = argv_of(shim, SPECIAL_ARGS, environ)
    assert argv == [node, target(tmp_path / "npm", "codex"), *SPECIAL_ARGS]


@pytest.mark.parametrize("local", [False, True], ids=["global", "node_modules-bin"])
@pytest.mark.parametrize("version", VERSIONS)
def test_a_native_program_shim_starts_the_program(
    tmp_path: Path, version: str, local: bool
) -> None:
    shim = install(tmp_path, version, "claude", local=local)
    argv = agent_argv([str(shim), *SPECIAL_ARGS], {}, client="claude", hint_env="TOMC_CLAUDE_BIN")
    assert argv == [target(tmp_path, "claude"), *SPECIAL_ARGS]


@pytest.mark.parametrize("version", VERSIONS)
def test_node_options_of_the_scripts_first_line_are_kept(tmp_path: Path, version: str) -> None:
    shim = install(tmp_path, version, "argtool")
    node = program(tmp_path, "node.exe")
    assert argv_of(shim, ["%PATH%"], {}) == [
        node,
        "--no-warnings",
        target(tmp_path, "argtool"),
        "%PATH%",
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_shim_that_sets_variables_is_not_seen_through(tmp_path: Path, version: str) -> None:
    """cmd-shim 6+ SETs a ``#!`` line's variables (older ones wrote a broken ``-S`` program):
    such a shim is run, with plain arguments only."""
    shim = install(tmp_path, version, "envtool")
    program(tmp_path, "node.exe")
    assert resolve_cmd_shim(str(shim), shim.read_text("utf-8"), {}) is None
    assert argv_of(shim, PLAIN_ARGS, {}) == [str(shim), *PLAIN_ARGS]
    with pytest.raises(UnsafeAgentArgumentError):
        argv_of(shim, ["%PATH%"], {})


UNKNOWN_SHIM = """@SETLOCAL\r
@IF NOT DEFINED NODE_PATH (\r
  @SET "NODE_PATH=%~dp0\\..\\node_modules"\r
)\r
@IF EXIST "%~dp0\\node.exe" (\r
  "%~dp0\\node.exe"  "%~dp0\\..\\@anthropic-ai\\claude-code\\cli.js" %*\r
) ELSE (\r
  @SET PATHEXT=%PATHEXT:;.JS;=;%\r
  node  "%~dp0\\..\\@anthropic-ai\\claude-code\\cli.js" %*\r
)\r
"""


@pytest.mark.parametrize("arg", SPECIAL_ARGS)
def test_a_batch_file_it_cannot_see_through_gets_no_argument_cmd_acts_on(
    tmp_path: Path, arg: str
) -> None:
    shim = tmp_path / "claude.cmd"
    shim.write_text(UNKNOWN_SHIM, "utf-8")
    program(tmp_path, "node.exe")
    with pytest.raises(UnsafeAgentArgumentError) as caught:
        agent_argv([str(shim), "-p", arg], {}, client="claude", hint_env="TOMC_CLAUDE_BIN")
    message = str(caught.value)
    assert repr(arg) in message and str(shim) in message and "TOMC_CLAUDE_BIN" in message
    assert isinstance(caught.value, TomcError)


def test_a_batch_file_it_cannot_see_through_gets_plain_arguments_as_they_are(
    tmp_path: Path,
) -> None:
    shim = tmp_path / "claude.bat"
    shim.write_text(UNKNOWN_SHIM, "utf-8")
    argv = agent_argv([str(shim), *PLAIN_ARGS], {}, client="claude", hint_env="TOMC_CLAUDE_BIN")
    assert argv == [str(shim), *PLAIN_ARGS]


def test_node_that_is_itself_a_batch_file_is_not_used(tmp_path: Path) -> None:
    shim = install(tmp_path / "npm", VERSIONS[-1], "codex")
    program(tmp_path / "nvm", "node.cmd")
    program(tmp_path / "later", "node.exe")
    environ = {"PATH": os.pathsep.join([str(tmp_path / "nvm"), str(tmp_path / "later")])}
    assert find_program("node", environ) is None
    assert argv_of(shim, PLAIN_ARGS, environ) == [str(shim), *PLAIN_ARGS]
    with pytest.raises(UnsafeAgentArgumentError, match="TOMC_CODEX_BIN"):
        argv_of(shim, [INJECTION], environ)


def test_the_suffix_is_matched_in_any_case(tmp_path: Path) -> None:
    shim = install(tmp_path, VERSIONS[-1], "codex")
    upper = shim.rename(tmp_path / "CODEX.CMD")
    node = program(tmp_path, "node.exe")
    assert argv_of(upper, ["x"], {}) == [node, target(tmp_path, "codex"), "x"]


def test_shapes_that_are_not_npm_shims() -> None:
    assert parse_cmd_shim("") is None
    assert parse_cmd_shim(UNKNOWN_SHIM) is None
    assert parse_cmd_shim('@"%~dp0\\a.exe" %*\r\n@"%~dp0\\b.exe" %*\r\n') is None
    # a program whose name cmd.exe would expand is not one TOMC starts by itself
    text = (FIXTURES / VERSIONS[-1] / "codex.cmd").read_text("utf-8")
    assert parse_cmd_shim(text.replace('"_prog=node"', '"_prog=%NODE%"')) is None
    assert resolve_cmd_shim("x.cmd", '@"%~dp0\\tool.py"   %*\r\n', {}) is None


def test_other_executables_are_left_alone(tmp_path: Path) -> None:
    for executable in ("claude", "claude.exe", str(tmp_path / "codex.js")):
        argv = [executable, INJECTION]
        assert agent_argv(argv, {}, client="c", hint_env="E", windows=False) == argv


def test_on_windows_a_named_node_script_is_started_with_node(tmp_path: Path) -> None:
    script = str(tmp_path / "codex.js")
    with pytest.raises(AgentNotFoundError, match="node"):
        agent_argv([script], {"PATH": ""}, client="codex", hint_env="E", windows=True)
    node = program(tmp_path / "node", "node.exe")
    argv = agent_argv(
        [script, INJECTION],
        {"PATH": str(tmp_path / "node")},
        client="c",
        hint_env="E",
        windows=True,
    )
    assert argv == [node, script, INJECTION]


class _FakeChild:
    """What ``subprocess.Popen`` returns, for a child that exits at once."""

    def __init__(self, argv: list[str], **options: object) -> None:
        self.argv = argv
        self.pid = os.getpid()
        self.returncode = 0

    def poll(self) -> int:
        return 0

    def wait(self) -> int:
        return 0


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The argv of every agent ``run_agent`` starts; no gateway is started (the calls to
    ``ensure_gateway`` are recorded as ``["ensure_gateway"]``)."""
    started: list[list[str]] = []

    def popen(argv: list[str], **options: object) -> _FakeChild:
        started.append(list(argv))
        return _FakeChild(argv)

    def ensure_gateway(*args: object) -> bool:
        started.append(["ensure_gateway"])
        return False

    monkeypatch.setattr(launcher, "ensure_gateway", ensure_gateway)
    monkeypatch.setattr(launcher.subprocess, "Popen", popen)
    return started


def test_tomc_run_starts_what_the_shim_starts(tmp_path: Path, launches: list[list[str]]) -> None:
    shim = install(tmp_path / "npm", VERSIONS[-1], "claude")
    env = isolated_env(tmp_path)
    code = launcher.run_agent(
        "claude",
        ["-p", INJECTION, "%PATH%"],
        agent=str(shim),
        environ=env,
        home=env["TOMC_HOME"],
        port=9,
    )
    assert code == 0
    assert launches == [
        ["ensure_gateway"],
        [target(tmp_path / "npm", "claude"), "-p", INJECTION, "%PATH%"],
    ]


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_tomc_runs_a_batch_file_it_cannot_see_through_with_its_own_arguments(
    tmp_path: Path, launches: list[list[str]], client: str
) -> None:
    """TOMC's own arguments (Codex's ``-c`` provider, Claude Code's ``--settings``, with the
    ``x-tomc-*`` headers) hold nothing cmd.exe acts on, so they never cause a refusal."""
    shim = tmp_path / f"{client}.cmd"
    shim.write_text(UNKNOWN_SHIM, "utf-8")
    env = isolated_env(tmp_path)
    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"env": {"ANTHROPIC_CUSTOM_HEADERS": "x-team: a"}}', "utf-8")
    code = launcher.run_agent(
        client,
        PLAIN_ARGS,
        agent=str(shim),
        environ=env,
        home=env["TOMC_HOME"],
        port=9,
        context_target=30000,
        thinking_prefix="drop_block",
    )
    assert code == 0
    (argv,) = launches[1:]
    assert argv[0] == str(shim) and argv[-len(PLAIN_ARGS) :] == PLAIN_ARGS
    assert len(argv) > 1 + len(PLAIN_ARGS)  # TOMC's own arguments are there


def test_tomc_run_refuses_before_starting_anything(
    tmp_path: Path, launches: list[list[str]]
) -> None:
    shim = tmp_path / "claude.cmd"
    shim.write_text(UNKNOWN_SHIM, "utf-8")
    env = isolated_env(tmp_path)
    with pytest.raises(UnsafeAgentArgumentError, match="echo INJECTED"):
        launcher.run_agent(
            "claude", ["-p", INJECTION], agent=str(shim), environ=env, home=env["TOMC_HOME"], port=9
        )
    assert launches == []


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_gets_the_arguments_exactly(tmp_path: Path) -> None:
    """The argv for a real cmd-shim shim, run: node and the script behind the shim, which
    prints the arguments it got."""
    shim = install(tmp_path, VERSIONS[-1], "codex")
    Path(target(tmp_path, "codex")).write_text(
        "console.log(JSON.stringify(process.argv.slice(2)))\n", "utf-8"
    )
    node = shutil.which("node")
    assert node is not None
    if sys.platform == "win32":
        shutil.copyfile(node, tmp_path / "node.exe")
    else:
        (tmp_path / "node.exe").symlink_to(node)
    args = [*SPECIAL_ARGS, *PLAIN_ARGS]
    argv = argv_of(shim, args, {"PATH": ""})
    assert argv[:2] == [str(tmp_path / "node.exe"), target(tmp_path, "codex")]
    done = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == args
