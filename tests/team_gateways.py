"""Several real ``tomc gateway serve`` processes sharing one store, and Debian's nginx in front
of them with ``deploy/nginx.conf`` (its gateway addresses replaced by loopback ports).

Each process has its own TOMC home, as each replica of ``deploy/compose.yaml`` has; the fake
upstream's URLs go into every home's settings.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway_helpers import SERVE, free_port, isolated_env, wait_for
from tomc._gateway.health import probe
from tomc._gateway.settings import GatewaySettings, save_settings

ROOT = Path(__file__).resolve().parent.parent
NGINX_CONF = ROOT / "deploy" / "nginx.conf"


@dataclass
class GatewayProcess:
    """One ``tomc gateway serve`` process on ``127.0.0.1:port``."""

    port: int
    home: Path
    args: tuple[str, ...]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> GatewayProcess:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*SERVE, "--port", str(self.port), "--home", str(self.home), *self.args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(lambda: probe(self.port).answering or self.process.poll() is not None)
        assert self.process.poll() is None, f"gateway did not start:\n{self.log_text()}"
        return self

    def kill(self) -> None:
        """``kill -9``: no shutdown, leases it holds are left to expire."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def status(self) -> dict[str, Any]:
        return httpx2.get(f"{self.url}/status.json", trust_env=False, timeout=30).json()

    def log_text(self) -> str:
        return self.log.read_text("utf-8", "replace")

    def rss_kb(self) -> int:
        """Resident memory of the process (Linux)."""
        assert self.process is not None
        text = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", text)[1])


@contextlib.contextmanager
def team_gateways(
    tmp_path: Path,
    upstreams: Mapping[str, str],
    store: str,
    count: int = 3,
    args: Sequence[str] = (),
) -> Iterator[list[GatewayProcess]]:
    """``count`` gateway processes on ``store``, each with its own home; stopped afterwards."""
    env = isolated_env(tmp_path)
    gateways = []
    for n in range(count):
        home = tmp_path / f"gateway-{n}"
        port = free_port()
        save_settings(GatewaySettings(port=port, upstreams=dict(upstreams)), home)
        all_args = ("--session-store", store, *args)
        gateways.append(GatewayProcess(port, home, all_args, env, tmp_path / f"gateway-{n}.log"))
    try:
        for gateway in gateways:
            gateway.start()
        yield gateways
    finally:
        for gateway in gateways:
            gateway.stop()


def nginx_binary() -> str:
    """Debian's nginx; skips the test when absent (fails under CI, where .ci/run installs it)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/bin")
    if found:
        return found
    reason = "no nginx on this machine (.ci/run installs Debian's nginx)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; under CI it must be installed")
    pytest.skip(reason)


def loopback_nginx_conf(
    ports: Sequence[int], listen: int, folder: Path, *, hashing: bool = True
) -> str:
    """``deploy/nginx.conf`` with the gateways at ``ports`` on loopback, listening on
    ``listen``, its temporary files and logs in ``folder``; without ``hashing``, its ``hash``
    line deleted (plain round robin, as the file's comment says)."""
    text = NGINX_CONF.read_text("utf-8")
    if not hashing:
        text, found = re.subn(r"\n *hash [^\n]*;", "", text)
        assert found == 1, "deploy/nginx.conf has no hash line"
    for n, port in enumerate(ports, start=1):
        text, found = re.subn(rf"server gateway-{n}:8787", f"server 127.0.0.1:{port}", text)
        assert found == 1, f"deploy/nginx.conf names no gateway-{n}"
    text, found = re.subn(r"listen 8787;", f"listen 127.0.0.1:{listen};", text)
    assert found == 1
    paths = "".join(
        f"    {kind}_temp_path {folder / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return text.replace("http {\n", f"http {{\n{paths}    access_log off;\n", 1)


@contextlib.contextmanager
def nginx_in_front(ports: Sequence[int], folder: Path, *, hashing: bool = True) -> Iterator[str]:
    """Debian's nginx on a free loopback port with the deploy config; yields its URL."""
    binary = nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o777)  # nginx's workers drop root and write temporary bodies here
    listen = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(loopback_nginx_conf(ports, listen, folder, hashing=hashing), "utf-8")
    directives = f"daemon off; pid {folder / 'nginx.pid'}; error_log {folder / 'error.log'};"
    checked = subprocess.run(
        [binary, "-t", "-p", str(folder), "-c", str(conf), "-g", directives],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen(
        [binary, "-p", str(folder), "-c", str(conf), "-g", directives],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: probe(listen).answering or process.poll() is not None)
        assert process.poll() is None, (folder / "error.log").read_text()
        yield f"http://127.0.0.1:{listen}"
    finally:
        process.send_signal(signal.SIGQUIT)  # graceful: finish what is in flight
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
