"""``tomc gateway ...``, ``tomc run`` and ``tomc restore-direct``: click commands over the
gateway package (registered on the main command in :mod:`tomc._cli`)."""

from __future__ import annotations

import errno

import click

# The command line's one error path, shared with tomc._cli.
from .._reporting import reported as _reported

__all__ = ["gateway_group", "restore_direct_command", "run_command"]


@click.group("gateway")
def gateway_group() -> None:
    """Run the local request gateway that Claude Code and Codex can be pointed at."""


class _TargetType(click.ParamType):
    """A context target: a number of tokens (at least 1024) or ``off``."""

    name = "N|off"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        from .._core.errors import InvalidOptionError
        from .settings import parse_context_target

        try:
            return parse_context_target(value)
        except InvalidOptionError as exc:
            self.fail(str(exc), param, ctx)


class _ThinkingType(click.ParamType):
    """A thinking-prefix behaviour, as the session defines them (read when used, so that the
    command line does not load the chat package to start)."""

    name = "BEHAVIOUR"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        from .._core.errors import InvalidOptionError
        from ..chat._options import THINKING_PREFIX, check_choice

        try:
            check_choice("--thinking-prefix", value, THINKING_PREFIX)
        except InvalidOptionError as exc:
            self.fail(str(exc), param, ctx)
        return value


_CONTEXT_TARGET = click.option(
    "--context-target",
    "--context-limit",
    "context_target",
    type=_TargetType(),
    default=None,
    help="Keep every request's prompt at or under N tokens, or 'off' for no target (default: "
    "the settings file, else a share of each agent's own auto-compaction threshold). "
    "--context-limit is the older name.",
)
_THINKING_PREFIX = click.option(
    "--thinking-prefix",
    type=_ThinkingType(),
    default=None,
    help="Anthropic signed thinking after a rewritten prefix: send the request as it is "
    "(passthrough), or let the provider drop those blocks (drop_block, its documented "
    "behaviour). Default: the settings file, else drop_block.",
)


_SERVE_OPTIONS = (
    click.option(
        "--allow-host",
        "allow_hosts",
        multiple=True,
        metavar="NAME",
        help="A host name clients reach the gateway by (repeatable; '*' for any); needed to "
        "serve beyond loopback.",
    ),
    click.option(
        "--session-store",
        envvar="TOMC_SESSION_STORE",
        default="memory",
        show_default=True,
        metavar="URL",
        help="Where conversations live: memory (this process) or redis://host:6379/0 (Redis or "
        "Valkey, shared by every gateway process; the 'team' extra).",
    ),
    click.option(
        "--workers",
        type=click.IntRange(1, 256),
        default=1,
        show_default=True,
        help="Processes sharing the port (above 1 needs a shared --session-store).",
    ),
    click.option(
        "--status-token",
        envvar="TOMC_STATUS_TOKEN",
        default=None,
        metavar="TOKEN",
        help="Token for the status page and inspector beyond loopback (default: a new one, "
        "printed).",
    ),
    click.option("--allow-remote", is_flag=True, hidden=True),
    click.option(
        "--allow-origin",
        "allow_origins",
        multiple=True,
        metavar="ORIGIN",
        help="Let web pages of ORIGIN (https://app.example) call the gateway from a browser "
        "(repeatable; default: the settings file's allow_origins, else none).",
    ),
)

_UPSTREAM = click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="NAME=URL",
    help="Forward NAME's requests to URL, a base URL (repeatable; NAME: anthropic, openai, "
    "chatgpt; wins over the settings file's upstreams). OpenAI's ends in /v1: "
    "openai=http://127.0.0.1:8790/v1, anthropic=http://127.0.0.1:8790.",
)


def _serve_options(command):  # type: ignore[no-untyped-def]
    """``tomc gateway serve``'s options for serving beyond one local agent (a team: see
    :mod:`.serving`; web pages: ``--allow-origin``)."""
    for option in reversed(_SERVE_OPTIONS):
        command = option(command)
    return command


@gateway_group.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to bind; anything but loopback needs --allow-host.",
)
@click.option(
    "--port", "-p", type=click.IntRange(0, 65535), default=None, help="Default: saved, else 8787."
)
@_UPSTREAM
@_serve_options
@_CONTEXT_TARGET
@_THINKING_PREFIX
@click.option(
    "--home", type=click.Path(), envvar="TOMC_HOME", default=None, help="TOMC home (settings)."
)
@click.option(
    "--cache-ttl",
    "cache_ttl_s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="How long the provider keeps a cached prompt without use (default: the settings "
    "file, else what each request says, else the provider's documented lifetime).",
)
@click.option("--verbose", "-v", is_flag=True, help="Log every request and decision.")
def serve_command(
    host: str,
    allow_hosts: tuple[str, ...],
    port: int | None,
    upstreams: tuple[str, ...],
    session_store: str,
    workers: int,
    status_token: str | None,
    context_target: int | str | None,
    thinking_prefix: str | None,
    home: str | None,
    allow_origins: tuple[str, ...],
    cache_ttl_s: float | None,
    verbose: bool,
    allow_remote: bool,
) -> None:
    """Serve the gateway in the foreground until Ctrl-C.

    For a team: several processes (--workers) or machines share conversations through
    --session-store redis://...; a load balancer in front may send any request anywhere.
    """
    from .._core.errors import TomcError
    from .proxy.access import new_status_token
    from .serving import ServeOptions, serve

    if allow_remote:
        raise click.UsageError("--allow-remote is replaced by --allow-host NAME")
    given = {
        "upstreams": _upstream_options(upstreams) if upstreams else None,
        "context_target": context_target,
        "thinking_prefix": thinking_prefix,
        "allow_origins": allow_origins or None,
        "cache_ttl_s": cache_ttl_s,
    }
    # The settings given as options, which win over the settings file.
    pinned = {name: value for name, value in given.items() if value is not None}
    options = ServeOptions(
        host, port, home, pinned, allow_hosts, status_token, session_store, workers, verbose
    )
    try:
        options = options.checked(new_status_token)
        options.settings()  # a bad settings file is named before anything binds
        serve(options, lambda line: click.echo(line, err=True), show_token=not status_token)
    except TomcError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        shown = options.port if options.port is not None else options.settings().port
        raise click.ClickException(_cannot_serve(host, shown, exc)) from None


def _cannot_serve(host: str, port: int, exc: OSError) -> str:
    """Why the gateway could not bind, and when the port is taken, by whom."""
    from .health import probe

    message = f"cannot serve on {host}:{port}: {exc.strerror or exc}"
    if exc.errno != errno.EADDRINUSE:
        return message
    found = probe(port)
    if found.answering:
        version = f" {found.version}" if found.version else ""
        return (
            f"{message}: a TOMC gateway{version} already answers there (see `tomc gateway "
            f"status --port {port}`); use it, stop it, or serve on another --port"
        )
    return f"{message}: another program uses it; serve on another --port"


def _upstream_options(values: tuple[str, ...]) -> dict[str, str]:
    """``--upstream NAME=URL`` values as the settings' ``upstreams`` (the last URL of a NAME
    wins); a usage error naming the flag for a bad one."""
    from .._core.errors import InvalidOptionError
    from .settings import parse_upstream

    try:
        return dict(parse_upstream(value) for value in values)
    except InvalidOptionError as exc:
        raise click.UsageError(str(exc)) from None


_CLIENT_CHOICE = click.Choice(["claude", "codex"])
_HOME = click.option(
    "--home",
    type=click.Path(),
    envvar="TOMC_HOME",
    default=None,
    help="TOMC home: gateway settings, activation records (default: $TOMC_HOME, else the "
    "user data directory).",
)
_PORT = click.option(
    "--port",
    "-p",
    type=click.IntRange(1, 65535),
    default=None,
    help="Gateway port (default: the saved setting, 8787).",
)


def _say(message: str) -> None:
    click.echo(f"tomc: {message}", err=True)


@gateway_group.command("activate")
@click.option("--client", "client", type=_CLIENT_CHOICE, required=True, help="Agent to point.")
@_PORT
@_HOME
@click.option(
    "--login",
    is_flag=True,
    help="Also keep the gateway running: start it now and at every login (systemd user unit, "
    "LaunchAgent or Task Scheduler task).",
)
def activate_command(client: str, port: int | None, home: str | None, login: bool) -> None:
    """Point an agent's own configuration at the gateway (until `tomc restore-direct`).

    Claude Code: env.ANTHROPIC_BASE_URL in its settings.json. Codex: a [model_providers.tomc]
    table and model_provider = "tomc" in its config.toml. The file is backed up first;
    running this again changes nothing and keeps the first backup.
    """
    from .local.activation import activate

    with _reported(f"activating {client}"):
        done = activate(client, port=port, home=home, login=login)
    for line in done:
        click.echo(line)


@gateway_group.command("status")
@_PORT
@_HOME
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_command(port: int | None, home: str | None, as_json: bool) -> None:
    """Show what points at the gateway and whether it answers.

    Exits with 3 when an agent points at a gateway that does not answer.
    """
    import json

    from .local.status import gateway_status

    with _reported("reading the gateway status"):
        status = gateway_status(home=home, port=port)
    if as_json:
        click.echo(json.dumps(status.to_dict(), indent=2, sort_keys=True))
    else:
        click.echo(status.to_text(), nl=False)
    if status.warnings:
        raise click.exceptions.Exit(3)


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@_PORT
@_HOME
@click.option(
    "--agent",
    "agent",
    default=None,
    metavar="PATH",
    help="The agent's executable (default: $TOMC_CLAUDE_BIN / $TOMC_CODEX_BIN, else claude / "
    "codex on PATH).",
)
@_CONTEXT_TARGET
@_THINKING_PREFIX
@click.argument("client", type=_CLIENT_CHOICE)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run_command(
    port: int | None,
    home: str | None,
    agent: str | None,
    context_target: int | str | None,
    thinking_prefix: str | None,
    client: str,
    args: tuple[str, ...],
) -> None:
    """Run Claude Code or Codex through the gateway, for this process only.

    Starts the gateway if none answers, runs CLIENT with ARGS pointed at it, and stops the
    gateway when the last `tomc run` ends. Nothing on disk changes. Options for tomc go
    before CLIENT; everything after it goes to the agent. Exits with the agent's exit code.
    """
    from .local.launcher import run_agent

    with _reported(f"running {client}"):
        code = run_agent(
            client,
            args,
            port=port,
            home=home,
            agent=agent,
            context_target=context_target,
            thinking_prefix=thinking_prefix,
            notify=_say,
        )
    raise click.exceptions.Exit(code)


@click.command("restore-direct")
@click.option(
    "--client",
    "client",
    type=_CLIENT_CHOICE,
    default=None,
    help="Only this agent (default: every activated agent).",
)
@_HOME
def restore_direct_command(client: str | None, home: str | None) -> None:
    """Undo `tomc gateway activate`: put the agents' configuration back as it was.

    A file unchanged since activation is restored byte for byte (or removed, when it did not
    exist); a file you edited since keeps your edits and loses only TOMC's keys. The login
    entry goes once no activated agent needs it. Safe to run again.
    """
    from .local.activation import restore_direct

    with _reported("restoring the direct configuration"):
        done = restore_direct(client, home=home)
    for line in done:
        click.echo(line)
