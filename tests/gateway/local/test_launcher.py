"""``tomc run claude|codex``: real ``tomc`` processes launching a fake agent (it records its
argv and environment and asks the gateway's ``/healthz`` over loopback), with a real gateway
started and stopped around it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_helpers import (
    free_port,
    gateway,
    isolated_env,
    make_fake_agent,
    stop_leftover_gateway,
    wait_for,
)
from tomc._gateway.agents.limits import DEFAULT_TARGET_SHARE
from tomc._gateway.health import probe
from tomc._gateway.local.launcher import plan_launch
from tomc._gateway.local.leases import live_leases, read_run_gateway
from tomc._gateway.settings import gateway_dir, load_settings


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = isolated_env(tmp_path)
    bin_dir = tmp_path / "bin"
    make_fake_agent(bin_dir, "claude")
    make_fake_agent(bin_dir, "codex")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["FAKE_AGENT_DIR"] = str(tmp_path / "records")
    (tmp_path / "records").mkdir()
    yield env
    stop_leftover_gateway(Path(env["TOMC_HOME"]))


def records(env: dict[str, str]) -> list[dict]:
    folder = Path(env["FAKE_AGENT_DIR"])
    return [json.loads(p.read_text("utf-8")) for p in sorted(folder.glob("*.json"))]


def tomc(args: list[str], env: dict[str, str], **options) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tomc", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **options,
    )


def start_tomc(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tomc", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def home_environ(home: Path) -> dict[str, str]:
    """An environment whose user home is ``home``, on POSIX (HOME) and Windows (USERPROFILE)."""
    return {"HOME": str(home), "USERPROFILE": str(home)}


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_run_claude_passes_env_argv_and_exit_code(env: dict[str, str]) -> None:
    port = free_port()
    home = Path(env["HOME"])
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{\n  "model": "opus"\n}\n', "utf-8")
    before = tree(home)
    env["FAKE_AGENT_EXIT"] = "7"

    done = tomc(["run", "--port", str(port), "claude", "-p", "two words", "--resume"], env)
    assert done.returncode == 7, done.stderr
    (record,) = records(env)
    assert record["argv"] == ["-p", "two words", "--resume"]
    assert record["env"]["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{port}"
    assert record["healthz"]["service"] == "tomc-gateway"  # it answered while the agent ran
    assert record["healthz"]["port"] == port
    assert f"started the TOMC gateway on http://127.0.0.1:{port}" in done.stderr
    assert f"stopped the TOMC gateway on http://127.0.0.1:{port}" in done.stderr
    assert not probe(port).answering
    folder = gateway_dir(Path(env["TOMC_HOME"]))
    assert live_leases(folder) == [] and not list((folder / "leases").iterdir())
    assert read_run_gateway(folder) is None
    assert tree(home) == before  # nothing in the agent's configuration changed


def test_run_codex_adds_a_provider_for_this_process_only(env: dict[str, str]) -> None:
    port = free_port()
    config = Path(env["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir()
    text = (
        '# mine\nmodel_provider = "corp"\n\n[model_providers.corp]\nname = "Corp"\n'
        'base_url = "https://llm.corp.example/v1"\nenv_key = "CORP_KEY"\n'
    )
    config.write_text(text, "utf-8")

    done = tomc(["run", "--port", str(port), "codex", "exec", "fix the tests"], env)
    assert done.returncode == 0, done.stderr
    (record,) = records(env)
    argv = record["argv"]
    assert argv[0] == "-c" and argv[2:4] == ["-c", 'model_provider="tomc"']
    assert argv[4:] == ["exec", "fix the tests"]
    name, value = argv[1].split("=", 1)
    assert name == "model_providers.tomc"
    assert tomllib.loads(f"x = {value}")["x"] == {
        "name": "TOMC gateway",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "wire_api": "responses",
        "env_key": "CORP_KEY",
        # Codex's default model (gpt-6.2-sol, 500K window): the share of its 450K threshold.
        "http_headers": {
            "x-tomc-context-target": f"{int(450_000 * DEFAULT_TARGET_SHARE)}; source=agent"
        },
    }
    assert record["healthz"]["service"] == "tomc-gateway"
    assert config.read_text("utf-8") == text
    # Requests still reach the user's own endpoint, through the gateway.
    assert load_settings(Path(env["TOMC_HOME"])).upstream("openai") == (
        "https://llm.corp.example/v1"
    )


@pytest.mark.parametrize(
    ("api_key", "auth_json", "auth"),
    [
        (None, False, ("requires_openai_auth", True)),
        ("sk-x", False, ("env_key", "OPENAI_API_KEY")),
        ("sk-x", True, ("requires_openai_auth", True)),
    ],
)
def test_codex_plan_auth(
    tmp_path: Path, api_key: str | None, auth_json: bool, auth: tuple[str, object]
) -> None:
    environ = home_environ(tmp_path)
    if api_key:
        environ["OPENAI_API_KEY"] = api_key
    if auth_json:
        (tmp_path / ".codex").mkdir()
        (tmp_path / ".codex" / "auth.json").write_text("{}", "utf-8")
    plan = plan_launch("codex", "/bin/codex", ["--yolo"], 9999, environ)
    assert plan.argv[0] == "/bin/codex" and plan.argv[-1] == "--yolo"
    table = tomllib.loads(f"x = {plan.argv[2].split('=', 1)[1]}")["x"]
    assert table[auth[0]] == auth[1]
    assert plan.upstreams == {}
    assert plan.env == environ


def test_claude_plan_records_the_users_endpoint(tmp_path: Path) -> None:
    environ = {**home_environ(tmp_path), "ANTHROPIC_BASE_URL": "https://corp.example/anthropic/"}
    plan = plan_launch("claude", "/bin/claude", ["-c"], 9999, environ)
    assert plan.argv == ("/bin/claude", "-c")
    assert plan.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9999"
    assert plan.upstreams == {"anthropic": "https://corp.example/anthropic"}

    # settings.json's env block would win over the environment: the address goes on the
    # command line too (as settings, which win over the file), and the file's own endpoint
    # is the upstream.
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"env": {"ANTHROPIC_BASE_URL": "https://team.example"}}', "utf-8")
    plan = plan_launch("claude", "/bin/claude", ["-c"], 9999, environ)
    assert plan.argv[1] == "--settings"
    assert json.loads(plan.argv[2]) == {"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999"}}
    assert plan.argv[3:] == ("-c",)
    assert plan.upstreams == {"anthropic": "https://team.example"}

    # Pointed at this very gateway already (activated): nothing extra, no loop recorded.
    settings.write_text('{"env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9999"}}', "utf-8")
    plan = plan_launch("claude", "/bin/claude", [], 9999, home_environ(tmp_path))
    assert plan.argv == ("/bin/claude",) and plan.upstreams == {}
    # Activated for the configured gateway, run on another port: that gateway is no upstream.
    plan = plan_launch("claude", "/bin/claude", [], 9000, home_environ(tmp_path), {9999})
    assert plan.argv[1] == "--settings" and plan.upstreams == {}


def test_gateway_stops_when_the_last_of_two_agents_exits(env: dict[str, str]) -> None:
    port = free_port()
    env["FAKE_AGENT_WAIT"] = "1"
    folder = gateway_dir(Path(env["TOMC_HOME"]))
    first = start_tomc(["run", "--port", str(port), "claude"], env)
    second = start_tomc(["run", "--port", str(port), "codex"], env)
    try:
        wait_for(lambda: len(records(env)) == 2, 60)
        assert probe(port).answering
        assert sorted(lease.client for lease in live_leases(folder)) == ["claude", "codex"]
        started = read_run_gateway(folder)
        assert started is not None

        by_pid = {record["pid"]: record for record in records(env)}
        wait_for(lambda: all(lease.agent_pid for lease in live_leases(folder)))
        leases = {lease.client: lease for lease in live_leases(folder)}
        assert set(by_pid) == {leases["claude"].agent_pid, leases["codex"].agent_pid}

        Path(env["FAKE_AGENT_DIR"], f"release-{leases['claude'].agent_pid}").touch()
        assert first.wait(60) == 0
        assert probe(port).answering, "stopped while codex still ran"
        assert [lease.client for lease in live_leases(folder)] == ["codex"]

        Path(env["FAKE_AGENT_DIR"], f"release-{leases['codex'].agent_pid}").touch()
        assert second.wait(60) == 0
        assert not probe(port).answering
        assert live_leases(folder) == [] and read_run_gateway(folder) is None
        assert "stopped the TOMC gateway" in second.stderr.read()
        # Stopped by its stop request (graceful on every platform), which it logged last.
        assert started.stop_token
        last = (folder / "gateway.log").read_text().strip().splitlines()[-1]
        assert last.endswith("stopped (a stop request from the tomc run that started it)")
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_a_gateway_started_otherwise_is_not_stopped(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    with gateway(port, Path(env["TOMC_HOME"])):
        done = tomc(["run", "--port", str(port), "claude"], env)
        assert done.returncode == 0, done.stderr
        assert records(env)[0]["healthz"]["port"] == port
        assert probe(port).answering
        assert "started" not in done.stderr and "stopped" not in done.stderr


def test_stale_leases_of_dead_agents_are_ignored(env: dict[str, str]) -> None:
    port = free_port()
    folder = gateway_dir(Path(env["TOMC_HOME"]))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (folder / "leases").mkdir(parents=True)
    stale = folder / "leases" / f"{dead.pid}.json"
    stale.write_text(
        json.dumps({"pid": dead.pid, "client": "claude", "port": port, "started_at": ""}),
        "utf-8",
    )
    done = tomc(["run", "--port", str(port), "claude"], env)
    assert done.returncode == 0, done.stderr
    assert not probe(port).answering  # the crashed agent's lease did not keep it running
    assert not stale.exists()


@pytest.mark.skipif(
    sys.platform == "win32",
    reason="POSIX-only: a SIGINT sent to a process; Ctrl-C on Windows is a console event",
)
def test_ctrl_c_is_forwarded_to_the_agent(env: dict[str, str]) -> None:
    port = free_port()
    env["FAKE_AGENT_WAIT"] = "1"
    running = start_tomc(["run", "--port", str(port), "claude"], env)
    try:
        wait_for(lambda: records(env), 60)
        running.send_signal(signal.SIGINT)  # no terminal: only the wrapper gets it
        assert running.wait(60) == 128 + signal.SIGINT
        assert records(env)[0]["signals"] == ["SIGINT"]
        assert not probe(port).answering
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()


def test_agent_stays_running_when_activated(env: dict[str, str]) -> None:
    """A gateway `tomc run` started is left running while a client is activated to use it."""
    port = free_port()
    env["FAKE_AGENT_WAIT"] = "1"
    running = start_tomc(["run", "--port", str(port), "codex"], env)
    try:
        wait_for(lambda: records(env), 60)
        activated = tomc(["gateway", "activate", "--client", "claude", "--port", str(port)], env)
        assert activated.returncode == 0, activated.stderr
        Path(env["FAKE_AGENT_DIR"], f"release-{records(env)[0]['pid']}").touch()
        assert running.wait(60) == 0
        assert "left the gateway running: claude is activated" in running.stderr.read()
        assert probe(port).answering
        status = tomc(["gateway", "status", "--json"], env)
        assert status.returncode == 0
        assert json.loads(status.stdout)["started_by_run"] is not None
        # Once nothing is activated and no tomc run is left, restore-direct stops it.
        restored = tomc(["restore-direct"], env)
        assert restored.returncode == 0, restored.stderr
        assert f"stopped the gateway `tomc run` had started on http://127.0.0.1:{port}" in (
            restored.stdout
        )
        assert not probe(port).answering
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()


def test_errors_are_one_line_without_starting_anything(env: dict[str, str]) -> None:
    port = free_port()
    env["PATH"] = os.defpath  # no fake agent, and no real one either
    missing = tomc(["run", "--port", str(port), "claude"], env)
    assert missing.returncode == 127
    assert missing.stderr == (
        "Error: claude was not found on PATH; install it, or name its executable with "
        "TOMC_CLAUDE_BIN=/path/to/claude\n"
    )
    assert not probe(port).answering

    env["TOMC_CODEX_BIN"] = "/nonexistent/codex"
    named = tomc(["run", "--port", str(port), "codex"], env)
    assert named.returncode == 127 and named.stderr.count("\n") == 1
    assert "Traceback" not in named.stderr

    settings = gateway_dir(Path(env["TOMC_HOME"])) / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text("{broken", "utf-8")
    broken = tomc(["run", "codex"], {**env, "TOMC_CODEX_BIN": ""})
    assert broken.returncode != 0 and broken.stderr.count("\n") == 1
    assert "gateway settings" in broken.stderr and "Traceback" not in broken.stderr


def test_port_taken_by_another_program(env: dict[str, str]) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = tomc(["run", "--port", str(port), "claude"], env, input="")
    # Something listens but does not answer HTTP: the gateway cannot bind there.
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"the gateway did not start on http://127.0.0.1:{port}: cannot serve" in done.stderr
    assert records(env) == []


def test_run_passes_the_agents_own_threshold_as_the_default_target(env: dict[str, str]) -> None:
    port = free_port()
    env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = "150000"
    env["ANTHROPIC_CUSTOM_HEADERS"] = "X-Mine: 1"
    done = tomc(["run", "--port", str(port), "claude", "-p", "hi"], env)
    assert done.returncode == 0, done.stderr
    (record,) = records(env)
    # 150,000 - 20,000 output - 13,000 buffer = 117,000; the default share of it.
    assert record["env"]["ANTHROPIC_CUSTOM_HEADERS"] == (
        f"X-Mine: 1\nx-tomc-context-target: {int(117_000 * DEFAULT_TARGET_SHARE)}; source=agent"
    )


def test_run_codex_threshold_and_explicit_options(env: dict[str, str]) -> None:
    port = free_port()
    config = Path(env["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "gpt-5.5"\nmodel_auto_compact_token_limit = 100000\n', "utf-8")
    done = tomc(["run", "--port", str(port), "codex", "exec", "go"], env)
    assert done.returncode == 0, done.stderr
    done = tomc(
        [
            "run",
            "--port",
            str(port),
            "--context-target",
            "off",
            "--thinking-prefix",
            "drop_block",
            "codex",
            "exec",
            "go",
        ],
        env,
    )
    assert done.returncode == 0, done.stderr
    first, second = records(env)
    tables = [tomllib.loads(f"x = {r['argv'][1].split('=', 1)[1]}")["x"] for r in (first, second)]
    expected = f"{int(100_000 * DEFAULT_TARGET_SHARE)}; source=agent"
    assert tables[0]["http_headers"] == {"x-tomc-context-target": expected}
    assert tables[1]["http_headers"] == {
        "x-tomc-context-target": "off",
        "x-tomc-thinking-prefix": "drop_block",
    }
