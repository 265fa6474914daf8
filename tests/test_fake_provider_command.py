"""``python -m tomc.testing.fake_provider``: the command starts, prints the URLs it serves, answers
the three wire formats over real HTTP (the official SDKs read its answers), logs each request,
stops on SIGTERM, and says so when its port is taken."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
import httpx2
import openai

from gateway_helpers import wait_for

COMMAND = (sys.executable, "-m", "tomc.testing.fake_provider")


@contextmanager
def fake_provider_command(folder: Path, *args: str) -> Iterator[tuple[str, Path]]:
    """The command, running for the block: yields its root URL (read from what it printed)
    and the file its log goes to."""
    out, err = folder / "stdout", folder / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen([*COMMAND, *args], stdout=stdout, stderr=stderr)
    try:
        found: list[str] = []

        def printed() -> bool:
            found[:] = re.findall(r"^fake provider on (http://127\.0\.0\.1:\d+)", out.read_text())
            return bool(found) or process.poll() is not None

        wait_for(printed)
        assert found, f"it printed no URL:\n{out.read_text()}\n{err.read_text()}"
        yield found[0], err
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0, err.read_text()


def test_the_command_answers_each_format(tmp_path):
    with fake_provider_command(tmp_path, "--port", "0", "--text", "Offline hello.") as (url, log):
        printed = (tmp_path / "stdout").read_text()
        assert f"OpenAI base URL (Chat Completions, Responses): {url}/v1" in printed
        assert f"Anthropic base URL (Messages): {url}" in printed
        client = openai.OpenAI(api_key="sk-anything", base_url=f"{url}/v1", max_retries=0)
        chat = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
        assert chat.choices[0].message.content == "Offline hello."
        response = client.responses.create(model="gpt-4o", input="hi")
        assert response.output_text == "Offline hello."
        claude = anthropic.Anthropic(api_key="sk-anything", base_url=url, max_retries=0)
        with claude.messages.stream(
            model="claude-opus-4-8", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            assert stream.get_final_text() == "Offline hello."
        missing = httpx2.get(f"{url}/v1/no-such-route", timeout=10)
        assert missing.status_code == 404 and "error" in missing.json()
        wait_for(lambda: log.read_text().count("fake provider: ") >= 4)
    lines = log.read_text().splitlines()
    assert "fake provider: POST /v1/chat/completions -> 200 (" in lines[0]
    assert lines[0].endswith(", 1 message)")
    assert any(line.startswith("fake provider: POST /v1/messages -> 200") for line in lines)


def test_a_taken_port_is_named(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*COMMAND, "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1
    assert f"fake provider: cannot listen on 127.0.0.1:{port}" in done.stderr


def test_help_names_the_options():
    done = subprocess.run([*COMMAND, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert all(option in done.stdout for option in ("--port", "--text", "--quiet"))
