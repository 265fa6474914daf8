"""``tomc gateway ...``, ``tomc run`` and ``tomc restore-direct``: click commands over the
gateway package (registered on the main command in :mod:`tomc._cli`)."""

from __future__ import annotations

import logging
from dataclasses import replace

import click

# The command line's one error path, shared with tomc._cli.
from .._reporting import reported as _reported

__all__ = ["gateway_group", "restore_direct_command", "run_command"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


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
    type=click.Choice(["passthrough", "drop_block"]),
    default=None,
    help="Anthropic signed thinking after a rewritten prefix: send the request as it is, or "
    "let the provider drop those blocks (its documented drop_block behaviour).",
)


@gateway_group.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to bind; anything but loopback needs --allow-remote.",
)
@click.option("--allow-remote", is_flag=True, help="Allow binding an interface beyond loopback.")
@click.option(
    "--port", "-p", type=click.IntRange(0, 65535), default=None, help="Default: saved, else 8787."
)
@_CONTEXT_TARGET
@_THINKING_PREFIX
@click.option(
    "--home", type=click.Path(), envvar="TOMC_HOME", default=None, help="TOMC home (settings)."
)
@click.option("--verbose", "-v", is_flag=True, help="Log every request and decision.")
def serve_command(
    host: str,
    allow_remote: bool,
    port: int | None,
    context_target: int | str | None,
    thinking_prefix: str | None,
    home: str | None,
    verbose: bool,
) -> None:
    """Serve the gateway in the foreground until Ctrl-C."""
    from .._core.errors import TomcError
    from .._home import default_home
    from ..web._server import AppServer
    from .proxy.app import create_gateway_app
    from .settings import load_settings

    if host not in _LOOPBACK:
        if not allow_remote:
            raise click.ClickException(
                f"refusing to serve on {host}: the gateway forwards credentials; pass "
                "--allow-remote to expose it beyond this machine"
            )
        click.echo(f"warning: serving on {host}; anyone who can reach it can use it", err=True)
    try:
        settings = load_settings(home)
        pinned: dict[str, object] = {}
        if context_target is not None:
            pinned["context_target"] = context_target
        if thinking_prefix is not None:
            pinned["thinking_prefix"] = thinking_prefix
        settings = replace(settings, port=port or settings.port, **pinned)
    except TomcError as exc:
        raise click.ClickException(str(exc)) from None
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO if verbose else logging.WARNING,
    )
    try:
        server = AppServer(
            create_gateway_app(
                settings, home=home if home is not None else default_home(), pinned=pinned
            ),
            host,
            0 if port == 0 else settings.port,
            verbose=verbose,
            lifespan="on",
        )
    except OSError as exc:
        reason = exc.strerror or exc
        raise click.ClickException(f"cannot serve on {host}:{settings.port}: {reason}") from None
    click.echo(f"TOMC gateway on {server.url} (Ctrl-C to stop)", err=True)
    server.run()


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
    from .agents.activation import activate

    with _reported(f"activating {client}"):
        done = activate(client, port=port, home=home, login=login)
    for line in done:
        click.echo(line)


@gateway_group.command("status")
@_HOME
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_command(home: str | None, as_json: bool) -> None:
    """Show what points at the gateway and whether it answers.

    Exits with 3 when an agent points at a gateway that does not answer.
    """
    import json

    from .local.status import gateway_status

    with _reported("reading the gateway status"):
        status = gateway_status(home=home)
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
    from .agents.activation import restore_direct

    with _reported("restoring the direct configuration"):
        done = restore_direct(client, home=home)
    for line in done:
        click.echo(line)
