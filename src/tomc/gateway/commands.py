"""``tomc gateway ...``, ``tomc run`` and ``tomc restore-direct``: click commands over the
gateway package (registered on the main command in :mod:`tomc.cli`)."""

from __future__ import annotations

import logging
from dataclasses import replace

import click

__all__ = ["gateway_group"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@click.group("gateway")
def gateway_group() -> None:
    """Run the local request gateway that Claude Code and Codex can be pointed at."""


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
@click.option(
    "--context-limit",
    type=click.IntRange(1024),
    default=None,
    help="Keep every request under this many tokens, even when the model's window is larger.",
)
@click.option(
    "--thinking-prefix",
    type=click.Choice(["passthrough", "drop_block"]),
    default=None,
    help="Anthropic signed thinking after a rewritten prefix: send the request as it is, or "
    "let the provider drop those blocks (its documented drop_block behaviour).",
)
@click.option(
    "--home", type=click.Path(), envvar="TOMC_HOME", default=None, help="TOMC home (settings)."
)
@click.option("--verbose", "-v", is_flag=True, help="Log every request and decision.")
def serve_command(
    host: str,
    allow_remote: bool,
    port: int | None,
    context_limit: int | None,
    thinking_prefix: str | None,
    home: str | None,
    verbose: bool,
) -> None:
    """Serve the gateway in the foreground until Ctrl-C."""
    from ..errors import TomcError
    from ..web.server import InspectorServer
    from .app import create_gateway_app
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
        changes = {
            "port": port or settings.port,
            "context_limit": context_limit or settings.context_limit,
            "thinking_prefix": thinking_prefix or settings.thinking_prefix,
        }
        settings = replace(settings, **changes)
    except TomcError as exc:
        raise click.ClickException(str(exc)) from None
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO if verbose else logging.WARNING,
    )
    try:
        server = InspectorServer(
            create_gateway_app(settings),
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
