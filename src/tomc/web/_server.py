"""The inspector's server: :func:`make_server` binds it, :func:`serve` runs it (``tomc serve``).

Both go through the server the gateway uses too (:mod:`tomc._http`): the same deadlines for slow
clients, the same refusal of cross-site requests (:class:`~tomc._http.origins.OriginCheck`, in
:func:`~tomc.web._app.create_app`) and the same redaction of secrets in log lines.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from .._core.compiler import compile_memory
from .._http.redact import install_redaction
from .._http.server import DEFAULT_HOST, DEFAULT_PORT, AppServer, allowed_hosts_for
from .._service import CompileFunction
from ._app import BODY_TIMEOUT_S, create_app

__all__ = ["make_server", "serve"]


def make_server(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    quiet: bool = False,
    verbose: bool = False,
    allowed_hosts: Collection[str] | None = None,
    compile_fn: CompileFunction = compile_memory,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> AppServer:
    """Bind the inspector (``port=0`` picks a free port; see ``url``) without serving yet.

    ``allowed_hosts`` adds Host names to those :func:`allowed_hosts_for` grants (``["*"]``:
    any); ``compile_fn`` replaces the compiler.
    """
    app = create_app(
        compile_fn=compile_fn,
        allowed_hosts=allowed_hosts_for(host, allowed_hosts or ()),
        body_timeout_s=body_timeout_s,
    )
    return AppServer(app, host, port, quiet=quiet, verbose=verbose)


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    verbose: bool = False,
    allowed_hosts: Collection[str] | None = None,
) -> None:
    """Run the inspector until interrupted (what ``tomc serve`` calls)."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    install_redaction()
    server = make_server(host, port, verbose=verbose, allowed_hosts=allowed_hosts)
    print(f"TOMC inspector on {server.url} (Ctrl-C to stop)", flush=True)
    server.run()
