"""`tomc gateway serve` on a taken port says who has it; `gateway status --port` looks there."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from gateway_helpers import free_port, gateway, isolated_env

TOMC = (sys.executable, "-m", "tomc")


def _tomc(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOMC, *args], env=env, capture_output=True, text=True, timeout=60)


def test_a_port_a_tomc_gateway_answers_on_is_named_as_such(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    port = free_port()
    with gateway(port, env=env):
        second = _tomc(["gateway", "serve", "--port", str(port)], env)
        assert second.returncode == 1 and "Traceback" not in second.stderr
        assert f"cannot serve on 127.0.0.1:{port}" in second.stderr
        assert "a TOMC gateway" in second.stderr and "already answers there" in second.stderr
        assert f"tomc gateway status --port {port}" in second.stderr

        # The saved setting is another port; --port looks at this one.
        status = _tomc(["gateway", "status", "--port", str(port), "--json"], env)
        shown = json.loads(status.stdout)
        assert shown["port"] == port and shown["answering"] is True
        elsewhere = json.loads(_tomc(["gateway", "status", "--json"], env).stdout)
        assert elsewhere["port"] != port


def test_a_port_another_program_holds_is_named_as_such(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _tomc(["gateway", "serve", "--port", str(port)], env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"cannot serve on 127.0.0.1:{port}" in done.stderr
    assert "another program uses it" in done.stderr and "TOMC gateway" not in done.stderr
