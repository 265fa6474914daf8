"""A real LiteLLM proxy (``litellm --config config.yaml``) as a process on a free loopback port,
with TOMC as its hook, in front of the project's fake provider.

LiteLLM runs from its own environment (``make .venv-litellm/.installed``: ``tomc[litellm]``,
LiteLLM pinned), found as ``TOMC_LITELLM_BIN`` or ``.venv-litellm``'s ``litellm``. Without it
the tests that need it skip, except under CI (``CI=true``), where its absence is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway_helpers import free_port

ROOT = Path(__file__).resolve().parents[1]
MASTER_KEY = "sk-litellm-master"
CLAUDE_MODEL = "claude-opus-4-8"
OPENAI_MODEL = "gpt-4o"


def litellm_binary() -> Path:
    """LiteLLM's command; skips the test when there is none (fails under CI)."""
    named = os.environ.get("TOMC_LITELLM_BIN")
    scripts = "Scripts" if sys.platform == "win32" else "bin"
    exe = "litellm.exe" if sys.platform == "win32" else "litellm"
    found = Path(named) if named else ROOT / ".venv-litellm" / scripts / exe
    if found.exists():
        return found
    reason = f"no LiteLLM proxy at {found} (make .venv-litellm/.installed installs it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; under CI it must be installed")
    pytest.skip(reason)


def config_text(
    fake_root: str, callbacks: str | None = "tomc.litellm.hook", general: str = ""
) -> str:
    """A ``config.yaml`` serving one Anthropic and one OpenAI model from the fake provider,
    with ``callbacks`` as its hook (``None``: LiteLLM alone) and ``general`` lines added to
    its ``general_settings``."""
    lines = [
        "model_list:",
        f"  - model_name: {CLAUDE_MODEL}",
        "    litellm_params:",
        f"      model: anthropic/{CLAUDE_MODEL}",
        f"      api_base: {fake_root}",
        "      api_key: sk-ant-upstream",
        f"  - model_name: {OPENAI_MODEL}",
        "    litellm_params:",
        f"      model: openai/{OPENAI_MODEL}",
        f"      api_base: {fake_root}/v1",
        "      api_key: sk-openai-upstream",
        "general_settings:",
        f"  master_key: {MASTER_KEY}",
        *([general] if general else []),
    ]
    if callbacks is not None:
        lines += ["litellm_settings:", f"  callbacks: {callbacks}"]
    return "\n".join(lines) + "\n"


@contextmanager
def litellm_proxy(
    folder: Path,
    config: str,
    env: Mapping[str, str] | None = None,
    *,
    files: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """LiteLLM serving ``config`` (with ``files`` written beside it) for the block; yields its
    base URL. Its output goes to ``folder / "litellm.log"`` (shown when it does not start)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(config, encoding="utf-8")
    for name, text in (files or {}).items():
        (folder / name).write_text(text, encoding="utf-8")
    port = free_port()
    environment = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price list at start
        "TOMC_HOME": str(folder / "tomc-home"),
        **(env or {}),
    }
    log = folder / "litellm.log"
    args = [str(litellm_binary()), "--config", "config.yaml", "--host", "127.0.0.1"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*args, "--port", str(port)], cwd=folder, env=environment, stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait(url: str, process: subprocess.Popen[Any], log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"LiteLLM exited:\n{log.read_text(errors='replace')[-4000:]}")
        try:
            if httpx2.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"LiteLLM did not start:\n{log.read_text(errors='replace')[-4000:]}")
