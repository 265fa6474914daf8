"""``tomc gateway serve``: what it may serve, and one process or ``--workers N`` sharing a socket.

The rules checked before anything binds:

- beyond loopback, the Host names clients use must be listed (``--allow-host NAME``, ``*`` for
  any): the gateway forwards credentials, and a Host check is what stops a web page from
  reaching it through DNS rebinding; the status page and the inspector then want a token
  (``--status-token``, else one is made and printed);
- ``--workers`` above 1 needs a shared ``--session-store``: with ``memory`` each process would
  hold its own conversations, and a conversation whose requests land on different processes
  would be rebuilt over and over.

Each worker builds its app from :data:`OPTIONS_ENV` (the options as JSON, set by the parent).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from starlette.applications import Starlette

from .._core.errors import InvalidOptionError
from .._http.server import _is_loopback, allowed_hosts_for
from .proxy.stop import STOP_TOKEN_ENV, StopSwitch
from .settings import GatewaySettings, load_settings, with_options

__all__ = ["OPTIONS_ENV", "ServeOptions", "serve", "worker_app"]

#: How the parent hands its options to the workers it starts.
OPTIONS_ENV = "TOMC_GATEWAY_SERVE_OPTIONS"


@dataclass(frozen=True)
class ServeOptions:
    """Everything ``tomc gateway serve`` was told (``pinned``: settings given as options;
    its ``upstreams``, from ``--upstream NAME=URL``, replace only the kinds they name)."""

    host: str = "127.0.0.1"
    port: int | None = None
    home: str | None = None
    pinned: Mapping[str, Any] = field(default_factory=dict)
    allow_hosts: tuple[str, ...] = ()
    status_token: str | None = None
    session_store: str = "memory"
    workers: int = 1
    verbose: bool = False

    @property
    def loopback(self) -> bool:
        return _is_loopback(self.host)

    def checked(self, new_token: Callable[[], str]) -> ServeOptions:
        """These options after the rules of the module docstring, with a status token made
        by ``new_token`` when one is needed and none was given; a clear error otherwise."""
        from .proxy.store import store_url

        names = tuple(n.strip() for n in self.allow_hosts if n.strip())
        if not self.loopback and not names:
            raise InvalidOptionError(
                f"refusing to serve on {self.host}: the gateway forwards credentials; name the "
                "host names its clients use with --allow-host NAME (repeatable, '*' for any)"
            )
        url = store_url(self.session_store)
        if url.scheme != "memory":  # names a missing client library now, not in each worker
            from ..chat import AutomaticChatSession
            from .proxy.store import open_conversations

            open_conversations(url, AutomaticChatSession)
        if self.workers < 1:
            raise InvalidOptionError(f"--workers must be >= 1, not {self.workers}")
        if self.workers > 1 and url.scheme == "memory":
            raise InvalidOptionError(
                f"--workers {self.workers} needs a shared --session-store such as "
                "redis://host:6379/0: in memory each process would keep its own conversations, "
                "and one conversation's requests landing on different processes would rebuild"
            )
        token = self.status_token or (None if self.loopback else new_token())
        return replace(self, allow_hosts=names, status_token=token, session_store=url.text)

    def settings(self, port: int | None = None) -> GatewaySettings:
        """The saved settings with the options that override them (``port``: the bound one)."""
        settings = load_settings(self.home)
        return with_options(settings, {**self.pinned, "port": port or self.port or settings.port})

    def app(self, port: int, stop: StopSwitch | None = None) -> Starlette:
        """The gateway app these options describe, for a server bound on ``port`` (``stop``:
        the stop request it answers); what the first request would wait for is loaded
        meanwhile (:func:`.proxy.options.warm_up`)."""
        from .._home import default_home
        from .proxy.app import create_gateway_app
        from .proxy.options import warm_up

        threading.Thread(target=warm_up, name="tomc-warm-up", daemon=True).start()

        home = self.home if self.home is not None else default_home()
        return create_gateway_app(
            self.settings(port),
            home=home,
            pinned=self.pinned,
            session_store=self.session_store,
            allowed_hosts=allowed_hosts_for(self.host, self.allow_hosts),
            status_token=self.status_token,
            stop=stop,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeOptions:
        data = json.loads(text)
        data["allow_hosts"] = tuple(data["allow_hosts"])
        return cls(**data)


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
        level=logging.INFO if verbose else logging.WARNING,
    )


def worker_app() -> Starlette:
    """The app of one worker process (uvicorn calls this in each; see :data:`OPTIONS_ENV`)."""
    options = ServeOptions.from_json(os.environ[OPTIONS_ENV])
    _configure_logging(options.verbose)
    assert options.port is not None, "the parent binds the port before starting workers"
    return options.app(options.port)


def serve(options: ServeOptions, say: Callable[[str], None], *, show_token: bool) -> None:
    """Serve until Ctrl-C (``options`` already :meth:`~ServeOptions.checked`; ``show_token``:
    print the status token, one that was made for this run). Binding errors are ``OSError``."""
    from .._http.server import AppServer, WorkerServer
    from .proxy.server import gateway_server

    _configure_logging(options.verbose)
    port = options.settings().port if options.port is None else options.port
    # Taken out of the environment: nothing the gateway starts inherits the secret.
    switch = StopSwitch(os.environ.pop(STOP_TOKEN_ENV, None))
    if options.workers == 1:
        server: AppServer | WorkerServer = gateway_server(
            options.app(port, switch), options.host, port, verbose=options.verbose
        )
        switch.connect(server.request_stop)
    else:
        server = WorkerServer(
            f"{__name__}:worker_app",
            options.host,
            port,
            options.workers,
            verbose=options.verbose,
        )
        os.environ[OPTIONS_ENV] = replace(options, port=server.port).to_json()
    store = options.session_store
    workers = f"{options.workers} workers, " if options.workers > 1 else ""
    say(f"TOMC gateway on {server.url} ({workers}session store {_shown(store)}; Ctrl-C to stop)")
    pinned = options.pinned.get("upstreams") or {}
    if pinned:
        say("upstreams from --upstream: " + ", ".join(f"{k}={v}" for k, v in pinned.items()))
    if options.status_token is not None:
        shown = options.status_token if show_token else "<your --status-token>"
        say(f"status page and inspector: {server.url}status?token={shown}")
    _exit_on_sigterm()
    try:
        server.run()
    finally:  # the log's last line, however it stopped
        why = " (a stop request from the tomc run that started it)" if switch.requested else ""
        say(f"TOMC gateway on {server.url} stopped{why}")


def _exit_on_sigterm() -> None:
    """Make SIGTERM an exit that runs ``finally`` blocks. uvicorn shuts down gracefully on it,
    then restores the handler it found and raises the signal again: with the default handler
    the process would die before saying it stopped."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _terminated)


def _terminated(number: int, frame: object) -> None:
    raise SystemExit(128 + number)


def _shown(store: str) -> str:
    from .proxy.store import store_url

    return store_url(store).shown
