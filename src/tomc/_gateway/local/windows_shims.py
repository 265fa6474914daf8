"""How ``tomc run`` starts an agent that npm installed on Windows as a ``.cmd`` shim, so that
its arguments reach it exactly as typed.

npm puts ``claude.cmd`` / ``codex.cmd`` on ``PATH`` (written by its ``cmd-shim`` package).
Windows runs a batch file through ``cmd.exe``, which parses the command line a second time:
``%VAR%`` is expanded, and ``&``, ``|``, ``<``, ``>``, ``^`` ... act outside its own idea of
quoting, which is not the one the Python ``subprocess`` module quotes for (the "BatBadBut"
class). So the shim is not run: its text names what it starts, the node script
(``"%dp0%\\node_modules\\@openai\\codex\\bin\\codex.js"``, with ``node.exe`` beside the shim
or ``node`` on ``PATH``) or the native program (Claude Code 2.x's ``bin\\claude.exe``), and
that is started directly, ``[node, script, *args]`` or ``[program, *args]``. A shim this
module does not recognise (another tool's, or one that sets variables) is run as before, but
only with arguments in which ``cmd.exe`` finds nothing to act on; otherwise
:class:`UnsafeAgentArgumentError` says which argument and how to avoid it.

Everything here takes the shim's path and text and an environment and returns an argv, so it
runs the same on any platform; :func:`agent_argv` applies it by the executable's suffix.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..._core.errors import AgentNotFoundError, InvalidOptionError

__all__ = [
    "CMD_SPECIAL",
    "CmdShim",
    "UnsafeAgentArgumentError",
    "agent_argv",
    "find_program",
    "parse_cmd_shim",
    "resolve_cmd_shim",
]

#: What ``cmd.exe`` acts on in a batch file's command line: variables (``%``, and ``!`` with
#: delayed expansion), its escape, command separators and redirections, blocks, line breaks.
#: A ``"`` alone only moves where cmd.exe thinks quoting starts and ends, which matters only
#: for these characters, so it is passed.
CMD_SPECIAL = frozenset("%!^&|<>()\r\n\x00")
BATCH_SUFFIXES = (".cmd", ".bat")
NODE_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs")
#: Suffixes of a program Windows starts without cmd.exe.
PROGRAM_SUFFIXES = (".exe", ".com")
DEFAULT_PATHEXT = ".COM;.EXE;.BAT;.CMD;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC"
#: The variables npm's shims set for themselves (any other is one a ``#!`` line sets).
SHIM_VARIABLES = frozenset({"dp0", "_prog", "pathext"})

_DP0 = r"(?:%dp0%|%~dp0)\\"
_DIRECT = re.compile(rf'"{_DP0}(?P<target>[^"%]+)"\s+%\*')
_VIA_PROG = re.compile(
    rf'(?:.*&\s*)?"%_prog%"(?P<args>(?:\s+[^"\s]+)*?)\s+"{_DP0}(?P<target>[^"%]+)"\s+%\*'
)
_IF_EXIST = re.compile(rf'IF EXIST "{_DP0}(?P<long>[^"%]+)"\s*\(', re.IGNORECASE)
_SET_PROG = re.compile(r'SET "_prog=(?P<value>[^"]*)"', re.IGNORECASE)
_SET = re.compile(r'(?:^|[\s&(])SET\s+"?(?P<name>[^=\s"]+)=', re.IGNORECASE)


class UnsafeAgentArgumentError(InvalidOptionError):
    """An argument for an agent behind a batch file that ``cmd.exe`` would act on."""


@dataclass(frozen=True)
class CmdShim:
    """What an npm ``.cmd`` shim starts: ``target`` (relative to the shim's folder, with
    backslashes), by itself (``program`` None: a native program) or as the script of
    ``program`` (``node``), found as ``program.exe`` beside the shim or else on ``PATH``."""

    target: str
    program: str | None = None
    program_args: tuple[str, ...] = ()


def parse_cmd_shim(text: str) -> CmdShim | None:
    """The command of a shim written by npm's ``cmd-shim`` (2.x to 9.x), or None when
    ``text`` is not one (another tool's, or one that sets variables for the program)."""
    lines = [line.strip().lstrip("@").strip() for line in text.splitlines()]
    runs = [line for line in lines if "%*" in line]
    if len(runs) != 1:
        return None
    names = {match["name"].lower() for line in lines for match in _SET.finditer(line)}
    if not names <= SHIM_VARIABLES:
        return None
    direct = _DIRECT.fullmatch(runs[0])
    if direct:
        return CmdShim(direct["target"])
    run = _VIA_PROG.fullmatch(runs[0])
    exists = _IF_EXIST.search(text)
    progs = [match["value"] for match in _SET_PROG.finditer(text)]
    if run is None or exists is None or len(progs) != 2:
        return None
    program = progs[1]
    args = tuple(run["args"].split())
    if (
        exists["long"].lower() != f"{program}.exe".lower()
        or not re.fullmatch(_DP0 + re.escape(exists["long"]), progs[0])
        or not program
        or _special(program)
        or any(_special(arg) for arg in args)
    ):
        return None
    return CmdShim(run["target"], program, args)


def _special(text: str) -> str:
    """The characters of ``text`` that cmd.exe acts on, in order, each once."""
    return "".join(dict.fromkeys(char for char in text if char in CMD_SPECIAL))


def _under(folder: Path, relative: str) -> str:
    parts = [part for part in re.split(r"[\\/]", relative) if part]
    return os.path.normpath(os.path.join(folder, *parts))


def find_program(name: str, environ: Mapping[str, str]) -> str | None:
    """``name`` as ``cmd.exe`` finds it on ``environ``'s ``PATH`` (with ``PATHEXT``, less
    ``.JS`` as npm's shims set it), when that is a program Windows starts directly (``.exe``,
    ``.com``); None when it is missing or a batch file or script."""
    pathext = environ.get("PATHEXT") or DEFAULT_PATHEXT
    suffixes = [ext.lower() for ext in pathext.split(";") if ext and ext.lower() != ".js"]
    names = [name] if Path(name).suffix.lower() in suffixes else []
    names += [name + suffix for suffix in suffixes]
    if os.path.dirname(name):
        folders = [""]
    else:
        entries = environ.get("PATH", "").split(os.pathsep)
        folders = [folder for folder in (entry.strip().strip('"') for entry in entries) if folder]
    for folder in folders:
        for candidate in names:
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path if Path(path).suffix.lower() in PROGRAM_SUFFIXES else None
    return None


def resolve_cmd_shim(shim: str, text: str, environ: Mapping[str, str]) -> list[str] | None:
    """The argv (without the user's arguments) that starts what the shim at ``shim`` with
    ``text`` starts, without cmd.exe: ``[program]`` or ``[node, *node_args, script]``; None
    when the shim is not npm's or its program cannot be started directly."""
    parsed = parse_cmd_shim(text)
    if parsed is None:
        return None
    folder = Path(shim).parent
    target = _under(folder, parsed.target)
    if parsed.program is None:
        return [target] if Path(target).suffix.lower() in PROGRAM_SUFFIXES else None
    beside = _under(folder, f"{parsed.program}.exe")
    program = beside if os.path.isfile(beside) else find_program(parsed.program, environ)
    if program is None:
        return None
    return [program, *parsed.program_args, target]


def _refuse(client: str, shim: str, argv: Sequence[str], hint_env: str) -> None:
    """Raise :class:`UnsafeAgentArgumentError` for the first of ``argv`` (the shim's path,
    then its arguments) that cmd.exe would act on."""
    for index, arg in enumerate(argv):
        found = _special(arg)
        if not found:
            continue
        shown = " ".join(repr(char)[1:-1] for char in found)
        what = f"its path {arg!r}" if index == 0 else f"the argument {arg!r}"
        raise UnsafeAgentArgumentError(
            f"cannot run {client} with {what}: {shim} is a batch file TOMC cannot see through "
            f"(not an npm shim it knows), and cmd.exe, which runs it, would act on the "
            f"characters {shown} (expanding variables, running commands) instead of passing "
            f"them on. Set {hint_env} (or --agent) to the real program, the .exe or the .js "
            f"node script the shim starts, to pass any argument as typed; or leave out {shown}"
        )


def agent_argv(
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    client: str,
    hint_env: str,
    windows: bool | None = None,
) -> list[str]:
    """The argv that starts ``argv`` (an agent's executable and its arguments) with every
    argument reaching the agent as given.

    A ``.cmd`` / ``.bat`` executable (an npm shim: chosen by the suffix, on any platform) is
    replaced by what it starts (:func:`resolve_cmd_shim`); one that cannot be seen through is
    kept, and :class:`UnsafeAgentArgumentError` raised when an argument holds a character
    cmd.exe acts on. On Windows (``windows``, default: this platform) a node script named as
    the executable (``TOMC_CODEX_BIN=...\\codex.js``) is started with ``node`` from ``PATH``.
    """
    executable, args = argv[0], list(argv[1:])
    suffix = Path(executable).suffix.lower()
    if suffix in BATCH_SUFFIXES:
        try:
            text = Path(executable).read_text("utf-8", "replace")
        except OSError:
            text = ""
        found = resolve_cmd_shim(executable, text, environ)
        if found is not None:
            return [*found, *args]
        _refuse(client, executable, argv, hint_env)
        return list(argv)
    if (sys.platform == "win32" if windows is None else windows) and (
        suffix in NODE_SCRIPT_SUFFIXES
    ):
        node = find_program("node", environ)
        if node is None:
            raise AgentNotFoundError(
                f"cannot run {client}: {executable} is a node script and node.exe was not "
                "found on PATH"
            )
        return [node, executable, *args]
    return list(argv)
