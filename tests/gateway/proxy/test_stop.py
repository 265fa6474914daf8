"""The stop request: how ``tomc run`` stops the gateway it started, gracefully on every
platform (on Windows a signal is TerminateProcess). A real ``tomc gateway serve`` process over
loopback."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway_helpers import SERVE, free_port, isolated_env, wait_for
from tomc._gateway.health import probe, send_stop
from tomc._gateway.local.leases import read_run_gateway, stop_gateway, write_run_gateway
from tomc._gateway.proxy.stop import STOP_HEADER, STOP_PATH, STOP_TOKEN_ENV
from tomc._gateway.settings import gateway_dir

SECRET = "s3cret-stop-token"


def start(tmp_path: Path, token: str | None) -> tuple[subprocess.Popen[bytes], int, Path]:
    env = isolated_env(tmp_path)
    if token is not None:
        env[STOP_TOKEN_ENV] = token
    port, log = free_port(), tmp_path / "gateway.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*SERVE, "--port", str(port), "--home", env["TOMC_HOME"]],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_for(lambda: probe(port).answering or process.poll() is not None)
    assert process.poll() is None, log.read_text()
    return process, port, log


def post(port: int, headers: dict[str, str]) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("POST", STOP_PATH, headers={"Content-Length": "0", **headers})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def finish(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def test_the_secret_stops_the_gateway_gracefully_with_a_last_line(tmp_path: Path) -> None:
    process, port, log = start(tmp_path, SECRET)
    try:
        assert post(port, {})[0] == 403
        status, body = post(port, {STOP_HEADER: SECRET + "x"})
        assert status == 403 and STOP_HEADER in body
        assert probe(port).answering  # refused requests stop nothing
        assert send_stop(port, SECRET)
        assert process.wait(15) == 0  # returned from serving: no signal, no kill
    finally:
        finish(process)
    last = log.read_text().strip().splitlines()[-1]
    assert last == (
        f"TOMC gateway on http://127.0.0.1:{port}/ stopped "
        "(a stop request from the tomc run that started it)"
    )


def test_a_gateway_started_without_a_secret_takes_no_stop_request(tmp_path: Path) -> None:
    process, port, _ = start(tmp_path, None)
    try:
        status, body = post(port, {STOP_HEADER: ""})
        assert status == 404 and "tomc run did not start it" in body
        assert not send_stop(port, "anything")
        assert probe(port).answering
    finally:
        finish(process)


def test_tomc_runs_stop_uses_the_request_and_the_secret_stays_private(tmp_path: Path) -> None:
    process, port, log = start(tmp_path, SECRET)
    folder = gateway_dir(tmp_path / "tomc")
    try:
        write_run_gateway(folder, process.pid, port, SECRET)
        found = read_run_gateway(folder)
        assert found is not None and found.stop_token == SECRET
        if sys.platform != "win32":  # owner-only, as every file of the gateway folder
            assert (folder / "run-gateway.json").stat().st_mode & 0o077 == 0
        assert stop_gateway(folder)
        assert process.wait(15) == 0
    finally:
        finish(process)
    assert "(a stop request from the tomc run" in log.read_text()
    assert read_run_gateway(folder) is None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX-only: SIGTERM is graceful there")
def test_a_gateway_from_before_the_secret_is_stopped_by_its_signal(tmp_path: Path) -> None:
    process, port, log = start(tmp_path, None)
    folder = gateway_dir(tmp_path / "tomc")
    try:
        write_run_gateway(folder, process.pid, port)  # no stop_token: an older run's file
        assert stop_gateway(folder)
        wait_for(lambda: process.poll() is not None, 15)
    finally:
        finish(process)
    assert log.read_text().strip().splitlines()[-1].endswith("stopped")
    assert os.environ.get(STOP_TOKEN_ENV) is None
