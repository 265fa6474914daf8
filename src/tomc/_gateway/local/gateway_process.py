"""The gateway process ``tomc run`` starts: detached, logging to ``<gateway folder>/gateway.log``,
recorded in ``run-gateway.json`` (:mod:`.leases`) with the secret of its stop request
(:mod:`tomc._gateway.proxy.stop`), so that the last ``tomc run`` can stop it gracefully on
every platform.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..._core.errors import GatewayError
from ..health import probe, wait_until_answering
from .leases import write_run_gateway

__all__ = ["LOG_FILE", "START_TIMEOUT_S", "ensure_gateway"]

START_TIMEOUT_S = 30.0
LOG_FILE = "gateway.log"
#: :data:`tomc._gateway.proxy.stop.STOP_TOKEN_ENV` (not imported: it loads Starlette).
STOP_TOKEN_ENV = "TOMC_GATEWAY_STOP_TOKEN"


def _spawn_gateway(
    port: int, home: Path, folder: Path, stop_token: str, serve_options: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    argv = [sys.executable, "-m", "tomc", "gateway", "serve", "--port", str(port)]
    argv += ["--home", str(home), *serve_options]
    options: dict[str, object] = {}
    if sys.platform == "win32":  # pragma: no cover - Windows only
        options["creationflags"] = (
            subprocess.DETACHED_PROCESS  # type: ignore[attr-defined]
            | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
            | subprocess.CREATE_NO_WINDOW  # type: ignore[attr-defined]
        )
    else:
        options["start_new_session"] = True  # no Ctrl-C of the terminal reaches it
    # The secret travels in the environment, not the command line (which others can read).
    env = {**os.environ, STOP_TOKEN_ENV: stop_token}
    with open(folder / LOG_FILE, "ab") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            env=env,
            **options,  # type: ignore[call-overload]
        )


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip().removeprefix("Error: ") if lines else ""


def ensure_gateway(
    port: int,
    home: Path,
    folder: Path,
    timeout_s: float = START_TIMEOUT_S,
    options: Sequence[str] = (),
) -> bool:
    """Make sure a gateway answers on ``port``; start one (and record it as started by
    ``tomc run``) when none does. Returns whether it was started here. Call under
    :func:`tomc._gateway.local.leases.run_lock`."""
    found = probe(port)
    if found.answering:
        return False
    if found.other:
        raise GatewayError(
            f"port {port} is used by another program, not a TOMC gateway; use "
            "`tomc run --port N` with a free port"
        )
    log = folder / LOG_FILE
    stop_token = secrets.token_urlsafe(24)
    process = _spawn_gateway(port, home, folder, stop_token, options)

    def exited() -> str | None:
        if process.poll() is None:
            return None
        return _last_line(log) or f"it exited with code {process.returncode}"

    try:
        wait_until_answering(port, timeout_s, still_starting=exited)
    except GatewayError as exc:
        if process.poll() is None:
            process.kill()
            process.wait()
        raise GatewayError(f"{exc} (its log: {log})") from None
    write_run_gateway(folder, process.pid, port, stop_token)
    return True
