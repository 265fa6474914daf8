"""A stand-in for ``claude`` / ``codex`` that ``tomc run`` launches in tests.

It records what it was given (argv, the environment variables that matter) and what it found
(the gateway's ``/healthz`` at the address it was pointed at, over real loopback HTTP, and with
``FAKE_AGENT_MESSAGE`` set, one Anthropic Messages request with that text) as JSON in
``$FAKE_AGENT_DIR/<pid>.json``; then it waits for ``$FAKE_AGENT_DIR/release-<pid>`` when
``FAKE_AGENT_WAIT`` is set, and exits with ``$FAKE_AGENT_EXIT``. SIGINT and SIGTERM are
recorded and end it with 128 + the signal's number.
"""

import json
import os
import signal
import sys
import time
import tomllib
import urllib.request
from pathlib import Path


def parent_pid() -> int:
    """The parent process's id. On Windows from NtQueryInformationProcess: ``os.getppid``
    calls PssCaptureSnapshot there, which Wine (``make test-windows``) lacks."""
    if sys.platform != "win32":
        return os.getppid()
    import ctypes

    class BasicInformation(ctypes.Structure):
        _fields_ = [(name, ctypes.c_void_p) for name in ("a", "b", "c", "d", "pid", "parent")]

    info = BasicInformation()
    query = ctypes.WinDLL("ntdll").NtQueryInformationProcess
    status = query(ctypes.c_void_p(-1), 0, ctypes.byref(info), ctypes.sizeof(info), None)
    assert status == 0, f"NtQueryInformationProcess: {status:#x}"
    return int(info.parent)


FOLDER = Path(os.environ["FAKE_AGENT_DIR"])
#: The agent's process as ``tomc run`` knows it: this one, or on Windows the ``cmd.exe`` that
#: runs the agent's ``.cmd`` file and this process (``FAKE_AGENT_VIA_CMD``).
PID = parent_pid() if os.environ.get("FAKE_AGENT_VIA_CMD") else os.getpid()
RECORD = FOLDER / f"{PID}.json"
ENV_KEYS = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "OPENAI_API_KEY",
    "HOME",
    "TOMC_HOME",
    "CODEX_HOME",
)


def gateway_root(argv: list[str]) -> str | None:
    """Where this agent was pointed: Claude Code's variable, or Codex's -c provider."""
    if os.environ.get("ANTHROPIC_BASE_URL"):
        return os.environ["ANTHROPIC_BASE_URL"]
    for index, arg in enumerate(argv[:-1]):
        if arg == "-c" and argv[index + 1].startswith("model_providers.tomc="):
            value = argv[index + 1].split("=", 1)[1]
            base = tomllib.loads(f"x = {value}")["x"]["base_url"]
            return base.removesuffix("/v1")
    return None


def write(data: dict) -> None:
    temp = RECORD.with_suffix(".tmp")
    temp.write_text(json.dumps(data), "utf-8")
    os.replace(temp, RECORD)


def main() -> int:
    argv = sys.argv[1:]
    record: dict = {"pid": PID, "argv": argv, "signals": []}
    record["env"] = {key: os.environ.get(key) for key in ENV_KEYS}
    root = gateway_root(argv)
    record["root"] = root
    if root:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{root}/healthz", timeout=10) as response:
            record["healthz"] = json.loads(response.read())
        if os.environ.get("FAKE_AGENT_MESSAGE"):  # one Messages request through the gateway
            body = {
                "model": "claude-opus-4-8",
                "max_tokens": 64,
                "messages": [{"role": "user", "content": os.environ["FAKE_AGENT_MESSAGE"]}],
            }
            request = urllib.request.Request(
                f"{root}/v1/messages",
                data=json.dumps(body).encode(),
                headers={
                    "content-type": "application/json",
                    "x-api-key": "sk-fake-agent",
                    "anthropic-version": "2023-06-01",
                },
            )
            with opener.open(request, timeout=30) as response:
                record["message_status"] = response.status

    def stop(number: int, frame: object) -> None:
        record["signals"].append(signal.Signals(number).name)
        write(record)
        sys.exit(128 + number)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    write(record)
    if os.environ.get("FAKE_AGENT_WAIT"):
        release = FOLDER / f"release-{PID}"
        deadline = time.monotonic() + 120
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return int(os.environ.get("FAKE_AGENT_EXIT", "0"))


if __name__ == "__main__":
    sys.exit(main())
