"""Temporary files of the atomic writer left by a killed activation: ``restore-direct`` and
``activate`` remove them, and only them (files of the writer's own name pattern for the files
they manage)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_helpers import free_port, gateway, isolated_env
from tomc._core.errors import GatewayError
from tomc._gateway.local.activation import activate, restore_direct
from tomc._gateway.settings import gateway_dir

CONFIG = 'model = "gpt-5-codex"\n'

# Dies like kill -9 when the atomic writer is about to rename its temporary file onto the file
# named by argv[1]: nothing after it runs, no cleanup handler either (on Windows, os.kill with a
# number that is no console event is TerminateProcess, the process's exit status that number).
KILLED_ACTIVATION = """
import os, signal, sys
from pathlib import Path

real_replace = os.replace

def replace(source, target):
    if Path(target).name == sys.argv[1]:
        os.kill(os.getpid(), getattr(signal, "SIGKILL", 9))
    real_replace(source, target)

os.replace = replace
from tomc._gateway.local.activation import activate
activate(sys.argv[2], port=int(sys.argv[3]), home=sys.argv[4])
"""


@pytest.fixture(scope="module")
def live_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    with gateway(port, tmp_path_factory.mktemp("gateway-home")):
        yield port


def temp_files(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{name}."))


def kill_activation(env: dict[str, str], at: str, client: str, port: int) -> None:
    argv = [sys.executable, "-c", KILLED_ACTIVATION, at, client, str(port), env["TOMC_HOME"]]
    done = subprocess.run(argv, env=env, capture_output=True, timeout=60)
    assert done.returncode == (9 if sys.platform == "win32" else -9), done.stderr.decode()


def test_restore_removes_what_a_killed_activation_left(tmp_path: Path, live_port: int) -> None:
    env = isolated_env(tmp_path)
    config = Path(env["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CONFIG)
    kill_activation(env, "config.toml", "codex", live_port)
    (left,) = temp_files(config.parent, "config.toml")  # the writer's .config.toml.XXXXXXXX
    assert len(left) == len(".config.toml.") + 8
    # Look-alikes that are not the writer's: other lengths or characters.
    for name in (".config.toml.swp", ".config.toml.Backup12", ".config.toml.bak-2024x"):
        (config.parent / name).write_text("mine")

    done = restore_direct("codex", home=env["TOMC_HOME"], environ=env)

    assert config.read_text() == CONFIG
    assert temp_files(config.parent, "config.toml") == [
        ".config.toml.Backup12",
        ".config.toml.bak-2024x",
        ".config.toml.swp",
    ]
    assert any("temporary file" in line and left in line for line in done)


def test_activate_removes_leftovers_of_the_backup_and_the_config(
    tmp_path: Path, live_port: int
) -> None:
    env = isolated_env(tmp_path)
    config = Path(env["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CONFIG)
    kill_activation(env, "codex.original", "codex", live_port)
    activations = gateway_dir(env["TOMC_HOME"]) / "activations"
    assert len(temp_files(activations, "codex.original")) == 1
    fd, _ = tempfile.mkstemp(prefix=".config.toml.", dir=config.parent)  # as the writer names it
    os.close(fd)

    activate("codex", port=live_port, home=env["TOMC_HOME"], environ=env)

    assert temp_files(activations, "codex.original") == []
    assert temp_files(config.parent, "config.toml") == []
    restore_direct("codex", home=env["TOMC_HOME"], environ=env)
    assert config.read_text() == CONFIG


def test_a_read_only_config_is_refused_and_leaves_nothing_beside_it(
    tmp_path: Path, live_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows refuses to replace a read-only file and to delete one; the writer's temporary
    file takes the read-only mode of the file it was to replace. Emulated here (as root on
    Linux neither is refused): the activation fails naming the file, and nothing is left."""
    env = isolated_env(tmp_path)
    config = Path(env["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CONFIG)
    config.chmod(0o444)
    real_unlink, real_replace = os.unlink, os.replace

    def replace(source: str, target: str) -> None:
        if os.path.exists(target) and not os.stat(target).st_mode & 0o200:
            raise PermissionError(13, "Access is denied", str(target))
        real_replace(source, target)

    def unlink(path: str, *args: object, **kwargs: object) -> None:
        if os.path.exists(path) and not os.stat(path).st_mode & 0o200:
            raise PermissionError(13, "Access is denied", str(path))
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(GatewayError, match=r"cannot write .*config\.toml: Access is denied"):
        activate("codex", port=live_port, home=env["TOMC_HOME"], environ=env)
    assert temp_files(config.parent, "config.toml") == []
    assert config.read_text() == CONFIG
