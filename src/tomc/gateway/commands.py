"""``tomc gateway ...``, ``tomc run`` and ``tomc restore-direct``: click commands over the
gateway package (registered on the main command in :mod:`tomc.cli`)."""

from __future__ import annotations

from contextlib import AbstractContextManager

import click

__all__ = ["gateway_group", "restore_direct_command", "run_command"]


@click.group("gateway")
def gateway_group() -> None:
    """Run the local request gateway that Claude Code and Codex can be pointed at."""


@gateway_group.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option(
    "--port",
    "-p",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port (default: the saved setting, 8787).",
)
@click.option(
    "--home", type=click.Path(), envvar="TOMC_HOME", default=None, help="TOMC home (settings)."
)
@click.option("--verbose", "-v", is_flag=True, help="Log every request.")
def serve_command(host: str, port: int | None, home: str | None, verbose: bool) -> None:
    """Serve the gateway in the foreground until Ctrl-C."""
    from dataclasses import replace

    from ..web.server import InspectorServer
    from .app import create_gateway_app
    from .settings import load_settings

    settings = load_settings(home)
    if port is not None and port != 0:
        settings = replace(settings, port=port)
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: serving on {host}; anyone who can reach it can use it", err=True)
    try:
        server = InspectorServer(
            create_gateway_app(settings), host, settings.port if port != 0 else 0, verbose=verbose
        )
    except OSError as exc:
        raise click.ClickException(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}"
        ) from None
    click.echo(f"TOMC gateway on {server.url} (Ctrl-C to stop)")
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


def _reported(doing: str) -> AbstractContextManager[None]:
    """The command line's one error path: a message on stderr and the exit code of the error
    table (:data:`tomc.service.ERROR_TABLE`), never a traceback."""
    from ..cli import _reported as reported  # cli imports this module; import when used

    return reported(doing)


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
    from .activation import activate

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

    from .status import gateway_status

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
@click.argument("client", type=_CLIENT_CHOICE)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run_command(
    port: int | None, home: str | None, agent: str | None, client: str, args: tuple[str, ...]
) -> None:
    """Run Claude Code or Codex through the gateway, for this process only.

    Starts the gateway if none answers, runs CLIENT with ARGS pointed at it, and stops the
    gateway when the last `tomc run` ends. Nothing on disk changes. Options for tomc go
    before CLIENT; everything after it goes to the agent. Exits with the agent's exit code.
    """
    from .launcher import run_agent

    with _reported(f"running {client}"):
        code = run_agent(client, args, port=port, home=home, agent=agent, notify=_say)
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
    from .activation import restore_direct

    with _reported("restoring the direct configuration"):
        done = restore_direct(client, home=home)
    for line in done:
        click.echo(line)
