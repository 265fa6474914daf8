"""``tomc gateway activate``, ``tomc restore-direct`` and ``tomc gateway status`` on temporary
home folders, against a real ``tomc gateway serve`` over loopback.

Nothing here touches the real home folder or the real service manager: HOME, TOMC_HOME and
CODEX_HOME point into ``tmp_path``, and login entries are installed through a recording
runner.
"""

from __future__ import annotations

import http.server
import json
import plistlib
import shlex
import subprocess
import sys
import threading
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

import pytest

from gateway_helpers import SERVE, free_port, gateway, isolated_env, wait_for
from tomc._core.errors import GatewayError
from tomc._gateway.agents.claude_config import claude_activate, claude_deactivate
from tomc._gateway.agents.codex_config import codex_activate, codex_deactivate
from tomc._gateway.agents.journal import load_record
from tomc._gateway.health import probe
from tomc._gateway.local.activation import activate, restore_direct
from tomc._gateway.local.login import (
    launchd_plist,
    login_entry,
    serve_argv,
    systemd_unit,
    task_xml,
)
from tomc._gateway.local.status import gateway_status
from tomc._gateway.settings import gateway_dir, load_settings

CLAUDE_SETTINGS = (
    "{\n"
    '\t"model": "opus",\n'
    '\t"env": {\n'
    '\t\t"DISABLE_TELEMETRY": "1",\n'
    '\t\t"ANTHROPIC_BASE_URL": "https://llm-proxy.example.com/anthropic"\n'
    "\t},\n"
    '\t"permissions": { "allow": ["Bash(ls:*)", "Read"] },\n'
    '\t"statusLine": "ünïcödé ✓"\n'
    "}\n"
)

CODEX_CONFIG = """\
# Codex settings, by hand
model = "gpt-5-codex"  # the one I like
model_provider = "azure"

[model_providers.azure]  # company endpoint
name = "Azure"
base_url = "https://example.openai.azure.com/openai"
env_key = "AZURE_OPENAI_API_KEY"
query_params = { api-version = "2025-04-01-preview" }

[mcp_servers.tomc]
command = "tomc"
args = ["mcp"]
"""


@pytest.fixture(scope="module")
def live_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """One real gateway for the tests that only need one to answer."""
    port = free_port()
    with gateway(port, tmp_path_factory.mktemp("gateway-home")):
        yield port


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path)


def tomc_home(env: dict[str, str]) -> Path:
    return Path(env["TOMC_HOME"])


def home(env: dict[str, str]) -> Path:
    return Path(env["HOME"])


def write(path: Path, text: str, mode: int = 0o644) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    path.chmod(mode)
    return path.read_bytes()


def activate_with_login(
    client: str, env: dict[str, str], port: int, runner: Recorder, platform: str = "linux"
) -> list[str]:
    return activate(
        client,
        port=port,
        home=tomc_home(env),
        environ=env,
        login=True,
        runner=runner,
        platform=platform,
    )


class Recorder:
    """A service-manager runner that records commands instead of running them."""

    def __init__(self, fail: str | None = None, on_start=None) -> None:
        self.commands: list[tuple[str, ...]] = []
        self.fail = fail
        self.on_start = on_start

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.commands.append(tuple(argv))
        if self.fail and self.fail in argv:
            return 1, "Failed to connect to bus: No medium found"
        if self.on_start and ("start" in argv or "/Run" in argv or "bootstrap" in argv):
            self.on_start()
        return 0, ""


# ---- Claude Code ----------------------------------------------------------------------------


def test_claude_activate_twice_then_restore_twice(env: dict[str, str], live_port: int) -> None:
    settings = home(env) / ".claude" / "settings.json"
    original = write(settings, CLAUDE_SETTINGS, 0o640)
    folder = gateway_dir(tomc_home(env))

    done = activate("claude", port=live_port, home=tomc_home(env), environ=env)
    assert f"claude: {settings} now points at http://127.0.0.1:{live_port}" in done
    after = settings.read_text("utf-8")
    assert json.loads(after)["env"]["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{live_port}"
    # Only the one value changed: every other byte (tabs, the inline array, unicode) is kept.
    assert after == CLAUDE_SETTINGS.replace(
        "https://llm-proxy.example.com/anthropic", f"http://127.0.0.1:{live_port}"
    )
    if sys.platform != "win32":  # Windows files have no POSIX mode to keep
        assert (settings.stat().st_mode & 0o777) == 0o640
    backup = folder / "activations" / "claude.original"
    assert backup.read_bytes() == original
    record = load_record(folder, "claude")
    assert record is not None and record.state == "active" and record.existed
    assert record.changes[0].previous == "https://llm-proxy.example.com/anthropic"
    # The user's own endpoint becomes the gateway's upstream.
    assert load_settings(tomc_home(env)).upstream("anthropic") == (
        "https://llm-proxy.example.com/anthropic"
    )

    journal = (folder / "activations" / "claude.json").read_bytes()
    activated = settings.read_bytes()
    again = activate("claude", port=live_port, home=tomc_home(env), environ=env)
    assert "nothing changed" in again[-1]
    assert settings.read_bytes() == activated
    assert backup.read_bytes() == original
    assert (folder / "activations" / "claude.json").read_bytes() == journal

    restored = restore_direct("claude", home=tomc_home(env), environ=env)
    assert restored == [f"claude: {settings} restored byte for byte"]
    assert settings.read_bytes() == original
    if sys.platform != "win32":  # Windows files have no POSIX mode to keep
        assert (settings.stat().st_mode & 0o777) == 0o640
    assert not (folder / "activations" / "claude.json").exists()
    assert not backup.exists()

    assert restore_direct("claude", home=tomc_home(env), environ=env) == [
        "nothing to restore: claude is not activated"
    ]
    assert settings.read_bytes() == original


def test_claude_file_that_did_not_exist_is_removed_with_its_folder(
    env: dict[str, str], live_port: int
) -> None:
    config_dir = home(env) / "profiles" / "work"
    env["CLAUDE_CONFIG_DIR"] = str(config_dir)  # Claude Code's own variable is respected
    activate("claude", port=live_port, home=tomc_home(env), environ=env)
    settings = config_dir / "settings.json"
    assert json.loads(settings.read_text("utf-8")) == {
        "env": {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{live_port}"}
    }
    assert not (home(env) / ".claude").exists()
    record = load_record(gateway_dir(tomc_home(env)), "claude")
    assert record is not None and not record.existed
    assert record.created_dirs == (str(config_dir), str(config_dir.parent))

    done = restore_direct(home=tomc_home(env), environ=env)
    assert done == [f"claude: removed {settings} (it did not exist before activation)"]
    assert not settings.exists()
    assert not (home(env) / "profiles").exists()
    assert sorted(p.name for p in home(env).iterdir()) == []


def test_restore_keeps_edits_made_after_activation(env: dict[str, str], live_port: int) -> None:
    settings = home(env) / ".claude" / "settings.json"
    write(settings, CLAUDE_SETTINGS)
    activate("claude", port=live_port, home=tomc_home(env), environ=env)
    edited = settings.read_text("utf-8").replace('"model": "opus"', '"model": "sonnet"')
    write(settings, edited)

    done = restore_direct("claude", home=tomc_home(env), environ=env)
    assert "changed since activation" in done[0] and "other edits are kept" in done[0]
    # The user's edit survives; TOMC's key holds its previous value again.
    assert settings.read_text("utf-8") == CLAUDE_SETTINGS.replace(
        '"model": "opus"', '"model": "sonnet"'
    )


def test_restore_leaves_a_key_the_user_pointed_elsewhere(
    env: dict[str, str], live_port: int
) -> None:
    settings = home(env) / ".claude" / "settings.json"
    write(settings, '{\n  "model": "opus"\n}\n')
    activate("claude", port=live_port, home=tomc_home(env), environ=env)
    data = json.loads(settings.read_text("utf-8"))
    data["env"]["ANTHROPIC_BASE_URL"] = "https://other-proxy.example.com"
    write(settings, json.dumps(data, indent=2) + "\n")

    done = restore_direct("claude", home=tomc_home(env), environ=env)
    assert "left env.ANTHROPIC_BASE_URL alone" in done[0]
    after = json.loads(settings.read_text("utf-8"))
    assert after["env"]["ANTHROPIC_BASE_URL"] == "https://other-proxy.example.com"


def test_claude_edit_is_symmetric_for_many_layouts() -> None:
    layouts = [
        "{}",
        '{"model":"opus"}',
        '{"model": "opus", "env": {}}',
        '{\n    "env": {},\n    "x": [1, 2]\n}',
        '{\r\n\t"a": {\r\n\t\t"env": 1\r\n\t}\r\n}\r\n',
        '{\n  "env": {\n    "A": "1",\n    "ANTHROPIC_BASE_URL": "https://x.example"\n  }\n}',
    ]
    for text in layouts:
        edit = claude_activate(text, "http://127.0.0.1:8787", {})
        assert json.loads(edit.text)["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8787"
        back = claude_deactivate(edit.text, edit.changes, edit.created)
        assert back.text == text, text
    new = claude_activate(None, "http://127.0.0.1:8787", {})
    assert new.text == '{\n  "env": {\n    "ANTHROPIC_BASE_URL": "http://127.0.0.1:8787"\n  }\n}\n'


# ---- Codex ----------------------------------------------------------------------------------


def test_codex_custom_provider_round_trip(env: dict[str, str], live_port: int) -> None:
    codex_home = home(env) / "codex-home"
    env["CODEX_HOME"] = str(codex_home)
    config = codex_home / "config.toml"
    original = write(config, CODEX_CONFIG)

    activate("codex", port=live_port, home=tomc_home(env), environ=env)
    text = config.read_text("utf-8")
    data = tomllib.loads(text)
    assert data["model_provider"] == "tomc"
    assert data["model_providers"]["tomc"] == {
        "name": "TOMC gateway",
        "base_url": f"http://127.0.0.1:{live_port}/v1",
        "wire_api": "responses",
        "env_key": "AZURE_OPENAI_API_KEY",  # the previous provider's auth is carried over
        "query_params": {"api-version": "2025-04-01-preview"},
    }
    assert data["model_providers"]["azure"]["base_url"] == (
        "https://example.openai.azure.com/openai"
    )
    for line in ("# Codex settings, by hand", "# the one I like", "# company endpoint"):
        assert line in text
    gateway_settings = load_settings(tomc_home(env))
    assert gateway_settings.upstream("openai") == "https://example.openai.azure.com/openai"
    assert gateway_settings.upstream("chatgpt") == "https://chatgpt.com/backend-api/codex"

    activated = config.read_bytes()
    activate("codex", port=live_port, home=tomc_home(env), environ=env)
    assert config.read_bytes() == activated

    restore_direct("codex", home=tomc_home(env), environ=env)
    assert config.read_bytes() == original


def test_a_crlf_codex_config_keeps_crlf_on_every_line(env: dict[str, str], live_port: int) -> None:
    config = home(env) / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    original = CODEX_CONFIG.replace("\n", "\r\n").encode("utf-8")
    config.write_bytes(original)
    activate("codex", port=live_port, home=tomc_home(env), environ=env)
    activated = config.read_bytes()
    assert b"TOMC gateway" in activated
    assert activated.count(b"\n") == activated.count(b"\r\n")
    assert tomllib.loads(activated.decode("utf-8"))["model_provider"] == "tomc"
    restore_direct("codex", home=tomc_home(env), environ=env)
    assert config.read_bytes() == original


def test_codex_key_level_restore_keeps_user_tables(env: dict[str, str], live_port: int) -> None:
    config = home(env) / ".codex" / "config.toml"
    write(config, CODEX_CONFIG)
    activate("codex", port=live_port, home=tomc_home(env), environ=env)
    write(config, config.read_text("utf-8") + '\n[mcp_servers.docs]\ncommand = "docs"\n')

    done = restore_direct("codex", home=tomc_home(env), environ=env)
    assert "only the keys TOMC set" in done[0]
    assert config.read_text("utf-8") == CODEX_CONFIG + '\n[mcp_servers.docs]\ncommand = "docs"\n'


@pytest.mark.parametrize(
    ("api_key", "auth_json", "expected"),
    [
        (None, False, {"requires_openai_auth": True}),
        ("sk-test", False, {"env_key": "OPENAI_API_KEY"}),
        ("sk-test", True, {"requires_openai_auth": True}),
    ],
)
def test_codex_builtin_provider_auth(
    env: dict[str, str],
    live_port: int,
    api_key: str | None,
    auth_json: bool,
    expected: dict[str, object],
) -> None:
    codex_home = home(env) / ".codex"
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    if auth_json:
        write(codex_home / "auth.json", '{"auth_mode": "chatgpt"}')
    activate("codex", port=live_port, home=tomc_home(env), environ=env)
    config = codex_home / "config.toml"
    provider = tomllib.loads(config.read_text("utf-8"))["model_providers"]["tomc"]
    assert provider == {
        "name": "TOMC gateway",
        "base_url": f"http://127.0.0.1:{live_port}/v1",
        "wire_api": "responses",
        **expected,
    }
    restore_direct(home=tomc_home(env), environ=env)
    assert not config.exists()
    assert codex_home.exists() == auth_json  # a folder TOMC created goes, the user's stays


def test_codex_refuses_providers_it_cannot_read(env: dict[str, str], live_port: int) -> None:
    config = home(env) / ".codex" / "config.toml"
    for text, message in [
        ('model_provider = "ollama"\n', "built-in provider 'ollama'"),
        ('model_provider = "mine"\n', r"no \[model_providers.mine\] table"),
        ("model = [unclosed\n", "is not valid TOML"),
    ]:
        before = write(config, text)
        with pytest.raises(GatewayError, match=message):
            activate("codex", port=live_port, home=tomc_home(env), environ=env)
        assert config.read_bytes() == before
    assert not (gateway_dir(tomc_home(env)) / "activations").exists()


def test_codex_edit_warns_about_a_profile_that_overrides_it() -> None:
    text = 'profile = "work"\n\n[profiles.work]\nmodel_provider = "openai"\n'
    edit = codex_activate(text, 8787, "openai_auth")
    assert any("profile 'work'" in note for note in edit.notes)
    back = codex_deactivate(edit.text, edit.changes, edit.created)
    assert back.text == text


# ---- crashes, refusals and errors -----------------------------------------------------------


class Crash(BaseException):
    """Stands for the process dying: nothing after it runs, no handler sees it."""


def crash_before_write(path: Path, data: bytes, mode: int) -> None:
    raise Crash


def crash_after_write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    raise Crash


@pytest.mark.parametrize("crash", [crash_before_write, crash_after_write])
@pytest.mark.parametrize("then", ["restore", "activate"])
def test_crash_between_backup_and_write_is_recovered(
    env: dict[str, str], live_port: int, crash, then: str
) -> None:
    config = home(env) / ".codex" / "config.toml"
    original = write(config, CODEX_CONFIG)
    folder = gateway_dir(tomc_home(env))
    with pytest.raises(Crash):
        activate("codex", port=live_port, home=tomc_home(env), environ=env, write_config=crash)
    record = load_record(folder, "codex")
    assert record is not None and record.state == "pending"
    assert (folder / "activations" / "codex.original").read_bytes() == original
    status = gateway_status(home=tomc_home(env), environ=env)
    assert any("interrupted" in warning for warning in status.warnings)

    if then == "restore":
        restore_direct("codex", home=tomc_home(env), environ=env)
        assert config.read_bytes() == original
        assert load_record(folder, "codex") is None
        return
    activate("codex", port=live_port, home=tomc_home(env), environ=env)
    record = load_record(folder, "codex")
    assert record is not None and record.state == "active"
    assert tomllib.loads(config.read_text("utf-8"))["model_provider"] == "tomc"
    assert (folder / "activations" / "codex.original").read_bytes() == original
    restore_direct("codex", home=tomc_home(env), environ=env)
    assert config.read_bytes() == original


def test_second_activation_on_another_port_keeps_the_first_backup(
    env: dict[str, str], live_port: int, tmp_path: Path
) -> None:
    settings = home(env) / ".claude" / "settings.json"
    original = write(settings, CLAUDE_SETTINGS)
    activate("claude", port=live_port, home=tomc_home(env), environ=env)
    other = free_port()
    with gateway(other, tmp_path / "other-gateway"):
        activate("claude", port=other, home=tomc_home(env), environ=env)
    assert json.loads(settings.read_text("utf-8"))["env"]["ANTHROPIC_BASE_URL"] == (
        f"http://127.0.0.1:{other}"
    )
    assert load_settings(tomc_home(env)).port == other
    backup = gateway_dir(tomc_home(env)) / "activations" / "claude.original"
    assert backup.read_bytes() == original
    assert restore_direct(home=tomc_home(env), environ=env)[0].endswith("restored byte for byte")
    assert settings.read_bytes() == original


def test_refuses_while_no_gateway_answers(env: dict[str, str]) -> None:
    settings = home(env) / ".claude" / "settings.json"
    original = write(settings, CLAUDE_SETTINGS)
    port = free_port()
    with pytest.raises(GatewayError) as caught:
        activate("claude", port=port, home=tomc_home(env), environ=env)
    assert f"tomc gateway serve --port {port}" in str(caught.value)
    assert settings.read_bytes() == original
    assert not gateway_dir(tomc_home(env)).exists()


@pytest.fixture
def other_program() -> Iterator[int]:
    """Something that is not a TOMC gateway answering HTTP on a port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"status": "ok", "service": "something-else"}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_refuses_another_program_on_the_port(env: dict[str, str], other_program: int) -> None:
    with pytest.raises(GatewayError, match=f"port {other_program} is used by another program"):
        activate("claude", port=other_program, home=tomc_home(env), environ=env)
    assert not (home(env) / ".claude").exists()


def test_unwritable_config_is_refused_and_rolled_back(env: dict[str, str], live_port: int) -> None:
    write(home(env) / ".claude", "a file where Claude Code's folder should be\n")
    with pytest.raises(GatewayError, match="a part of that path is a file"):
        activate("claude", port=live_port, home=tomc_home(env), environ=env)
    assert load_record(gateway_dir(tomc_home(env)), "claude") is None


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tomc", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_cli_errors_are_one_line(env: dict[str, str], live_port: int) -> None:
    port = free_port()
    refused = run_cli(["gateway", "activate", "--client", "claude", "--port", str(port)], env)
    assert refused.returncode == 3
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert f"tomc gateway serve --port {port}" in refused.stderr

    write(home(env) / ".claude" / "settings.json", '{"env": ')
    broken = run_cli(["gateway", "activate", "--client", "claude", "--port", str(live_port)], env)
    assert broken.returncode == 3
    assert "settings.json is not valid JSON" in broken.stderr
    assert broken.stderr.count("\n") == 1 and "Traceback" not in broken.stderr

    (home(env) / ".claude" / "settings.json").unlink()
    write(home(env) / ".codex", "not a folder")
    unwritable = run_cli(
        ["gateway", "activate", "--client", "codex", "--port", str(live_port)], env
    )
    assert unwritable.returncode == 3, unwritable.stderr
    assert unwritable.stderr.count("\n") == 1 and "Traceback" not in unwritable.stderr

    nothing = run_cli(["restore-direct"], env)
    assert nothing.returncode == 0
    assert nothing.stdout == "nothing to restore: claude or codex is not activated\n"

    done = run_cli(["gateway", "activate", "--client", "claude", "--port", str(live_port)], env)
    assert done.returncode == 0, done.stderr
    assert run_cli(["restore-direct", "--client", "claude"], env).returncode == 0


# ---- status ---------------------------------------------------------------------------------


def test_status_warns_when_an_agent_points_at_a_stopped_gateway(
    env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    settings = home(env) / ".claude" / "settings.json"
    with gateway(port, tmp_path / "gw"):
        activate("claude", port=port, home=tomc_home(env), environ=env)
        running = run_cli(["gateway", "status", "--json"], env)
        assert running.returncode == 0, running.stdout
        data = json.loads(running.stdout)
        assert data["answering"] is True and data["warnings"] == []
        claude = next(c for c in data["clients"] if c["client"] == "claude")
        assert claude["activated"] and claude["points_at"] == f"http://127.0.0.1:{port}"
        assert claude["config"] == str(settings)
    wait_for(lambda: not probe(port).answering)

    stopped = run_cli(["gateway", "status"], env)
    assert stopped.returncode == 3
    assert f"WARNING: claude points at http://127.0.0.1:{port}" in stopped.stdout
    assert "tomc restore-direct --client claude" in stopped.stdout

    # The configuration is read even when TOMC's record of it is gone.
    (gateway_dir(tomc_home(env)) / "activations" / "claude.json").unlink()
    lost = gateway_status(home=tomc_home(env), environ=env)
    claude_status = next(c for c in lost.clients if c.client == "claude")
    assert not claude_status.activated and claude_status.points_at is not None
    assert lost.warnings

    done = restore_direct("claude", home=tomc_home(env), environ=env)
    assert "without an activation record" in done[0]
    assert json.loads(settings.read_text("utf-8")) == {"env": {}}  # only the key goes
    assert gateway_status(home=tomc_home(env), environ=env).warnings == ()


# ---- login entries --------------------------------------------------------------------------


def test_systemd_unit_quotes_its_command() -> None:
    # A Linux path on any platform (systemd is Linux's).
    home = PurePosixPath("/home/a b/tomc %h")
    argv = serve_argv(8787, home, python="/usr/bin/python3")  # type: ignore[arg-type]
    unit = systemd_unit(argv)
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert exec_start == (
        'ExecStart="/usr/bin/python3" "-m" "tomc" "gateway" "serve" "--port" "8787" '
        '"--home" "/home/a b/tomc %%h"'
    )
    # systemd's quoting reads back as the same words (after %% -> %).
    assert shlex.split(exec_start.removeprefix("ExecStart=").replace("%%", "%")) == argv
    assert "WantedBy=default.target" in unit and "Restart=on-failure" in unit


def test_launchd_plist_and_task_xml_run_the_gateway() -> None:
    argv = serve_argv(9000, Path("/Users/me/tomc"), python="/opt/py/bin/python3")
    plist = plistlib.loads(launchd_plist(argv, Path("/Users/me/tomc/gateway/gateway.log")))
    assert plist["ProgramArguments"] == argv
    assert plist["Label"] == "dev.tomc.gateway" and plist["RunAtLoad"] is True

    xml = task_xml(
        serve_argv(9000, Path(r"C:\Users\Me\tomc data"), python=r"C:\Py\pythonw.exe"),
        r"PC\Me & Co",
    )
    root = ET.fromstring(xml.replace('encoding="UTF-16"', ""))
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    assert root.find("t:Triggers/t:LogonTrigger/t:UserId", ns).text == r"PC\Me & Co"
    assert root.find("t:Actions/t:Exec/t:Command", ns).text == r"C:\Py\pythonw.exe"
    assert root.find("t:Actions/t:Exec/t:Arguments", ns).text == (
        r'-m tomc gateway serve --port 9000 --home "C:\Users\Me\tomc data"'
    )
    assert root.find("t:Principals/t:Principal/t:RunLevel", ns).text == "LeastPrivilege"


@pytest.mark.parametrize(
    "platform",
    [
        "linux",
        pytest.param(
            "darwin",
            marks=pytest.mark.skipif(
                sys.platform == "win32", reason="POSIX-only: launchctl's domain is os.getuid()"
            ),
        ),
        "win32",
    ],
)
def test_login_entry_installed_and_removed(
    env: dict[str, str], live_port: int, platform: str
) -> None:
    runner = Recorder()
    folder = gateway_dir(tomc_home(env))
    activate_with_login("claude", env, live_port, runner, platform)
    entry = login_entry(live_port, tomc_home(env), folder, platform=platform, environ=env)
    assert entry.path.read_bytes() == entry.content
    assert str(home(env)) in str(entry.path) or str(folder) in str(entry.path)
    # A gateway already answers: the entry is registered but not started a second time.
    assert runner.commands == list(entry.install)
    record = json.loads((folder / "login.json").read_text("utf-8"))
    assert record["clients"] == ["claude"] and record["path"] == str(entry.path)

    runner.commands.clear()
    restore_direct(home=tomc_home(env), environ=env, runner=runner)
    assert runner.commands == list(entry.remove)
    assert not entry.path.exists() and not (folder / "login.json").exists()
    # The Task Scheduler's XML lived in the gateway folder's own login folder: gone with it.
    assert not (folder / "login").exists()


def test_login_entry_starts_the_gateway_when_none_answers(
    env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:  # what `systemctl --user start` would do
        started.append(
            subprocess.Popen(
                [*SERVE, "--port", str(port), "--home", env["TOMC_HOME"]],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    runner = Recorder(on_start=start)
    try:
        done = activate_with_login("codex", env, port, runner)
        assert runner.commands[-1] == ("systemctl", "--user", "start", "tomc-gateway.service")
        assert any(line.endswith(f"now points at http://127.0.0.1:{port}/v1") for line in done)
        unit = home(env) / ".config" / "systemd" / "user" / "tomc-gateway.service"
        assert f'"--port" "{port}"' in unit.read_text("utf-8")
    finally:
        for process in started:
            process.terminate()
            process.wait(10)
    restore_direct(home=tomc_home(env), environ=env, runner=Recorder())
    assert not (home(env) / ".config" / "systemd" / "user" / "tomc-gateway.service").exists()


def test_failed_login_entry_changes_nothing(env: dict[str, str]) -> None:
    runner = Recorder(fail="enable")
    with pytest.raises(GatewayError, match=r"systemctl --user enable tomc-gateway\.service"):
        activate_with_login("claude", env, free_port(), runner)
    assert not (home(env) / ".config" / "systemd" / "user" / "tomc-gateway.service").exists()
    assert not (home(env) / ".claude").exists()
    assert not (gateway_dir(tomc_home(env)) / "login.json").exists()


def test_login_entry_stays_while_another_client_uses_it(
    env: dict[str, str], live_port: int
) -> None:
    runner = Recorder()
    activate_with_login("claude", env, live_port, runner)
    activate_with_login("codex", env, live_port, runner)
    unit = home(env) / ".config" / "systemd" / "user" / "tomc-gateway.service"
    kept = restore_direct("claude", home=tomc_home(env), environ=env, runner=runner)
    assert kept[-1] == "login entry kept: codex still use the gateway"
    assert unit.exists()
    removed = restore_direct("codex", home=tomc_home(env), environ=env, runner=runner)
    assert removed[-1].startswith("login entry removed")
    assert not unit.exists()


def test_codex_home_must_be_a_folder(env: dict[str, str], live_port: int) -> None:
    env["CODEX_HOME"] = str(home(env) / "missing")
    with pytest.raises(GatewayError, match=r"CODEX_HOME is .*missing, which is not a folder"):
        activate("codex", port=live_port, home=tomc_home(env), environ=env)
    assert not (home(env) / "missing").exists()


def test_health_probe_names_the_service_the_app_answers_with() -> None:
    from tomc._gateway import health
    from tomc._gateway.proxy import app

    assert health.SERVICE_NAME == app.SERVICE_NAME  # kept apart so probing loads no Starlette


def test_round_trips_under_a_home_with_a_space_and_accented_letters(
    tmp_path: Path, live_port: int
) -> None:
    """Windows homes hold spaces and letters beyond ASCII ("C:\\Users\\Zoë Ångström"), and
    Windows editors write a BOM and CRLF: both clients' files come back byte for byte."""
    home_dir = tmp_path / "Zoë Ångström home"
    home_dir.mkdir()
    env = isolated_env(tmp_path)
    env["HOME"] = env["USERPROFILE"] = str(home_dir)
    env["TOMC_HOME"] = str(home_dir / "AppData" / "Local" / "tomc")
    claude = home_dir / ".claude" / "settings.json"
    codex = home_dir / ".codex" / "config.toml"
    originals = {}
    for path, text in ((claude, CLAUDE_SETTINGS), (codex, CODEX_CONFIG)):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
        originals[path] = path.read_bytes()
    for client in ("claude", "codex"):
        activate(client, port=live_port, home=env["TOMC_HOME"], environ=env)
    for path in originals:
        changed = path.read_bytes()
        assert changed != originals[path] and changed.startswith(b"\xef\xbb\xbf")
        assert changed.count(b"\n") == changed.count(b"\r\n")
    restore_direct(home=env["TOMC_HOME"], environ=env)
    for path, original in originals.items():
        assert path.read_bytes() == original
