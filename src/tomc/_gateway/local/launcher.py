"""``tomc run claude|codex [ARGS...]``: one agent process pointed at the gateway, nothing on disk
changed.

The launcher starts the gateway when none answers on the port (``python -m tomc gateway
serve``, detached, its output in ``<gateway folder>/gateway.log``), writes a lease for itself
(:mod:`.leases`), runs the agent with the gateway's address for that process only, forwards
the signals it gets to the agent, and passes the agent's exit code through. When the last
``tomc run`` ends, the gateway it started is stopped, unless a client is activated to use it;
a gateway started any other way is never stopped.

- Claude Code: ``ANTHROPIC_BASE_URL=http://127.0.0.1:<port>`` in its environment (the root,
  without ``/v1``). When the user's ``settings.json`` sets its own ``ANTHROPIC_BASE_URL`` (its
  ``env`` block wins over the environment), ``--settings`` with the gateway's address is
  added in front of the user's arguments so that this process still uses the gateway.
- Codex: ``-c model_providers.tomc={...} -c model_provider="tomc"`` in front of the user's
  arguments (see :func:`tomc._gateway.agents.codex_config.codex_run_overrides`).

The user's own endpoint (``ANTHROPIC_BASE_URL``, a custom Codex provider) becomes the gateway's
upstream for that kind, so requests still reach where they used to. On Windows an npm
``.cmd`` shim is not run, what it starts is (:mod:`.windows_shims`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from ..._core.errors import AgentNotFoundError, GatewayError, InvalidOptionError
from ..._home import default_home
from ..agents.agent_config import CLIENTS, decode_config, read_config
from ..agents.claude_config import BASE_URL_KEY, claude_base_url, claude_settings_path
from ..agents.codex_config import codex_auth_mode, codex_config_path, codex_run_overrides
from ..agents.journal import activated_clients
from ..agents.limits import AgentLimit, claude_code_limit, codex_limit
from ..health import gateway_root, loopback_port, probe
from ..proxy.options import TARGET_HEADER, THINKING_HEADER
from ..settings import DEFAULT_UPSTREAMS, gateway_dir, load_settings, record_upstream
from .gateway_process import START_TIMEOUT_S, ensure_gateway
from .leases import (
    clear_run_gateway,
    live_leases,
    read_run_gateway,
    remove_lease,
    run_lock,
    stop_gateway,
    write_lease,
)
from .windows_shims import agent_argv

__all__ = [
    "AGENT_ENV",
    "LaunchPlan",
    "ensure_gateway",
    "find_agent",
    "plan_launch",
    "run_agent",
]

#: The variable that names the agent's executable instead of looking for it on ``PATH``.
AGENT_ENV = {"claude": "TOMC_CLAUDE_BIN", "codex": "TOMC_CODEX_BIN"}
#: Claude Code's variable for extra request headers (newline-separated ``Name: value``).
CUSTOM_HEADERS_KEY = "ANTHROPIC_CUSTOM_HEADERS"
_FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP")


@dataclass(frozen=True)
class LaunchPlan:
    """What to run: the agent's argv and environment, the upstreams its own configuration
    used (to record), and notes for the user."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    upstreams: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: The agent's own compaction threshold and TOMC's default target for this launch.
    limit: AgentLimit | None = None


def find_agent(client: str, override: str | None, environ: Mapping[str, str]) -> str:
    """The agent's executable: ``override``, else ``$TOMC_CLAUDE_BIN`` / ``$TOMC_CODEX_BIN``,
    else ``claude`` / ``codex`` on ``PATH``."""
    named = override or environ.get(AGENT_ENV[client], "").strip()
    if named:
        found = shutil.which(named, path=environ.get("PATH"))
        if found is None and Path(named).is_file():
            found = named
        if found is None:
            raise AgentNotFoundError(f"cannot run {client}: {named} is not an executable file")
        return found
    found = shutil.which(client, path=environ.get("PATH"))
    if found is None:
        raise AgentNotFoundError(
            f"{client} was not found on PATH; install it, or name its executable with "
            f"{AGENT_ENV[client]}=/path/to/{client}"
        )
    return found


def _config_text(path: Path) -> tuple[str | None, str | None]:
    """The file's text (``None`` if absent) or, when it cannot be read, why."""
    try:
        data = read_config(path)
        return (decode_config(path, data) if data is not None else None), None
    except GatewayError as exc:
        return None, str(exc)


def _option(args: Sequence[str], *names: str) -> str | None:
    """The last value of ``--name value`` / ``--name=value`` in the agent's arguments."""
    found = None
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                found = args[index + 1]
            elif name.startswith("--") and arg.startswith(name + "="):
                found = arg[len(name) + 1 :]
    return found


def _codex_cli_config(args: Sequence[str]) -> dict[str, object]:
    """The keys that decide Codex's compaction threshold, as its own arguments set them
    (``-c key=value`` with a TOML value, ``-m``/``--model``, ``-p``/``--profile``)."""
    found: dict[str, object] = {}
    wanted = {"model", "model_context_window", "model_auto_compact_token_limit", "profile"}
    for index, arg in enumerate(args):
        pair = None
        if arg in ("-c", "--config") and index + 1 < len(args):
            pair = args[index + 1]
        elif arg.startswith("--config="):
            pair = arg[len("--config=") :]
        if pair is None or "=" not in pair:
            continue
        key, _, raw = pair.partition("=")
        if key.strip() not in wanted:
            continue
        try:
            found[key.strip()] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            found[key.strip()] = raw.strip()
    model = _option(args, "-m", "--model")
    if model:
        found["model"] = model
    profile = _option(args, "-p", "--profile")
    if profile:
        found["profile"] = profile
    return found


def agent_limit(
    client: str, args: Sequence[str], environ: Mapping[str, str], text: str | None
) -> AgentLimit | None:
    """The agent's own compaction threshold as this launch configures it: Claude Code's
    environment, ``settings.json`` (``text``) and ``--model``; Codex's ``config.toml``
    (``text``) and ``-c`` / ``-m`` / ``-p`` arguments."""
    try:
        data = (json.loads(text) if client == "claude" else tomllib.loads(text)) if text else {}
    except (ValueError, tomllib.TOMLDecodeError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    if client == "claude":
        env = {**environ, **{k: str(v) for k, v in (data.get("env") or {}).items()}}
        return claude_code_limit(_option(args, "--model"), env, data)
    return codex_limit(None, {**data, **_codex_cli_config(args)})


def tomc_headers(
    limit: AgentLimit | None, context_target: int | str | None, thinking_prefix: str | None
) -> dict[str, str]:
    """The ``x-tomc-*`` headers the agent sends to the gateway (which removes them)."""
    headers: dict[str, str] = {}
    if context_target is not None:
        headers[TARGET_HEADER] = str(context_target)
    elif limit is not None and limit.target is not None:
        headers[TARGET_HEADER] = f"{limit.target}; source=agent"
    if thinking_prefix is not None:
        headers[THINKING_HEADER] = thinking_prefix
    return headers


def _merge_custom_headers(current: str, add: Mapping[str, str]) -> str:
    """``ANTHROPIC_CUSTOM_HEADERS`` (newline-separated ``Name: value``) with ``add``; the
    user's own lines are kept, earlier ``x-tomc-*`` lines replaced."""
    lines = [
        line
        for line in current.splitlines()
        if line.strip() and not line.strip().lower().startswith("x-tomc-")
    ]
    lines += [f"{name}: {value}" for name, value in add.items()]
    return "\n".join(lines)


def plan_launch(
    client: str,
    executable: str,
    args: Sequence[str],
    port: int,
    environ: Mapping[str, str],
    gateway_ports: Collection[int] = (),
    *,
    context_target: int | str | None = None,
    thinking_prefix: str | None = None,
) -> LaunchPlan:
    """How to run ``client`` against the gateway on ``port``; reads the agent's
    configuration, writes nothing. An endpoint on a loopback port in ``gateway_ports`` (the
    configured gateway's) is a TOMC gateway, never recorded as an upstream.

    The agent also sends ``x-tomc-context-target`` (``context_target`` when given, else the
    default from the agent's own threshold, marked ``source=agent``) and, when given,
    ``x-tomc-thinking-prefix``: Claude Code through ``ANTHROPIC_CUSTOM_HEADERS``, Codex through
    the ``tomc`` provider's ``http_headers``. The gateway removes them before forwarding.
    """
    env = dict(environ)
    root = gateway_root(port)
    notes: list[str] = []
    upstreams: dict[str, str] = {}
    if client == "claude":
        env[BASE_URL_KEY] = root
        path = claude_settings_path(environ)
        text, problem = _config_text(path)
        own = None
        if problem is None:
            try:
                own = claude_base_url(text, str(path))
            except GatewayError as exc:
                problem = str(exc)
        if problem:
            notes.append(problem)
        limit = agent_limit(client, args, environ, text if problem is None else None)
        headers = tomc_headers(limit, context_target, thinking_prefix)
        settings_env: dict[str, str] = {}
        if own is not None and own.rstrip("/") != root:
            # settings.json's env block wins over the environment: pass the address again as
            # command-line settings, which win over the user's settings file.
            settings_env[BASE_URL_KEY] = root
        if headers:
            try:
                file_env = (json.loads(text) or {}).get("env") or {} if text else {}
            except (ValueError, AttributeError):
                file_env = {}
            file_headers = file_env.get(CUSTOM_HEADERS_KEY) if isinstance(file_env, dict) else None
            current = file_headers if isinstance(file_headers, str) else None
            merged = _merge_custom_headers(
                current if current is not None else environ.get(CUSTOM_HEADERS_KEY, ""), headers
            )
            env[CUSTOM_HEADERS_KEY] = merged
            if current is not None:  # the file's value would win over the environment's
                settings_env[CUSTOM_HEADERS_KEY] = merged
        extra: list[str] = []
        if settings_env:
            extra = ["--settings", json.dumps({"env": settings_env})]
        before = own if own is not None else environ.get(BASE_URL_KEY, "").strip() or None
        if before and loopback_port(before) not in {port, *gateway_ports}:
            upstreams["anthropic"] = before.rstrip("/")
        return LaunchPlan((executable, *extra, *args), env, upstreams, tuple(notes), limit)
    path = codex_config_path(environ)
    text, problem = _config_text(path)
    if problem:
        notes.append(problem)
    limit = agent_limit(client, args, environ, text)
    overrides, upstreams, more = codex_run_overrides(
        text,
        port,
        codex_auth_mode(environ),
        str(path),
        extra_headers=tomc_headers(limit, context_target, thinking_prefix),
    )
    notes += more
    return LaunchPlan((executable, *overrides, *args), env, upstreams, tuple(notes), limit)


class _Forwarder:
    """Passes the signals this process gets on to the agent while it runs.

    A Ctrl-C typed in the terminal reaches every process of the foreground group, the agent
    included, so it is not sent a second time (Claude Code reads two quick Ctrl-C as "exit");
    a signal sent to this process alone (``kill``, a supervisor, no terminal) is forwarded.
    """

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        self.previous: dict[int, object] = {}

    def __enter__(self) -> _Forwarder:
        for name in _FORWARDED:
            number = getattr(signal, name, None)
            if number is not None:
                self.previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if number == signal.SIGINT and _terminal_sent_it():
            return
        if self.child.poll() is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                self.child.send_signal(number)


def _terminal_sent_it() -> bool:
    """Whether this process is in the terminal's foreground group (then the agent, in the
    same group, got the terminal's signal too)."""
    if sys.platform == "win32":  # pragma: no cover - the console signals every process
        return True
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            return os.tcgetpgrp(stream.fileno()) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            continue
    return False


def _exit_code(returncode: int) -> int:
    """The agent's exit code; killed by signal N: 128 + N, as a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


def run_agent(
    client: str,
    args: Sequence[str] = (),
    *,
    port: int | None = None,
    home: str | os.PathLike[str] | None = None,
    agent: str | None = None,
    environ: Mapping[str, str] | None = None,
    start_timeout_s: float = START_TIMEOUT_S,
    notify: Callable[[str], None] | None = None,
    context_target: int | str | None = None,
    thinking_prefix: str | None = None,
) -> int:
    """Run ``client`` with ``args`` through the gateway; return the exit code to exit with.

    ``notify`` receives one-line messages for the user (stderr in the CLI).
    """
    if client not in CLIENTS:
        raise InvalidOptionError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")
    say = notify or (lambda message: None)
    environ = os.environ if environ is None else environ
    home_path = Path(home).expanduser() if home is not None else default_home()
    folder = gateway_dir(home_path)
    settings = load_settings(home_path)
    port = settings.port if port is None else port
    executable = find_agent(client, agent, environ)
    plan = plan_launch(
        client,
        executable,
        args,
        port,
        environ,
        {settings.port},
        context_target=context_target,
        thinking_prefix=thinking_prefix,
    )
    argv = agent_argv(plan.argv, environ, client=client, hint_env=AGENT_ENV[client])
    for note in plan.notes:
        say(f"note: {note}")

    with run_lock(folder):
        for kind, url in sorted(plan.upstreams.items()):
            try:
                replaced = record_upstream(kind, url, home_path)
            except InvalidOptionError as exc:
                say(f"note: upstream not recorded: {exc}")
                continue
            if replaced is not None and probe(port).answering:
                # The running gateway reads its settings file again within a second.
                say(f"note: {kind} requests now go to {url} (was {replaced})")
        kinds = ("anthropic",) if client == "claude" else ("openai", "chatgpt")
        for kind in kinds:
            if kind not in plan.upstreams and settings.upstream(kind) != DEFAULT_UPSTREAMS[kind]:
                say(f"note: the gateway sends {kind} requests to {settings.upstream(kind)}")
        options: list[str] = []
        if context_target is not None:
            options += ["--context-target", str(context_target)]
        if thinking_prefix is not None:
            options += ["--thinking-prefix", thinking_prefix]
        started = ensure_gateway(port, home_path, folder, start_timeout_s, options)
        if started:
            say(f"started the TOMC gateway on {gateway_root(port)}")
        write_lease(folder, client, port)

    try:
        try:
            child = subprocess.Popen(argv, env=dict(plan.env))
        except OSError as exc:
            raise AgentNotFoundError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        write_lease(folder, client, port, child.pid)
        with _Forwarder(child):
            returncode = child.wait()
    finally:
        _release(folder, say)
    return _exit_code(returncode)


def _release(folder: Path, say: Callable[[str], None]) -> None:
    with run_lock(folder):
        remove_lease(folder)
        if live_leases(folder, prune=True):
            return
        started = read_run_gateway(folder)
        if started is None:
            clear_run_gateway(folder)
            return
        still_used = activated_clients(folder)
        if still_used:
            say(
                f"left the gateway running: {' and '.join(still_used)} is activated to use it "
                "(`tomc restore-direct` undoes that)"
            )
            return
        if stop_gateway(folder):
            say(f"stopped the TOMC gateway on {gateway_root(started.port)}")
