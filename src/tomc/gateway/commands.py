"""``tomc gateway ...``, ``tomc run`` and ``tomc restore-direct``: click commands over the
gateway package (registered on the main command in :mod:`tomc.cli`)."""

from __future__ import annotations

import click

__all__ = ["gateway_group"]


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
