from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tomc.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "project_log.txt"


def test_compile_prints_memory_and_inspector() -> None:
    result = CliRunner().invoke(
        main,
        [
            "compile",
            str(EXAMPLE),
            "--task",
            "What is deploy_target?",
            "--budget",
            "80",
            "--inspect",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("STATE deploy_target = production (u11)")
    assert "SOURCE UNITS" in result.output and "LEDGER" in result.output


def test_compile_json_from_stdin_chat_messages() -> None:
    messages = [
        {"role": "user", "content": "A = 1"},
        {"role": "assistant", "content": "B copies A"},
    ]
    result = CliRunner().invoke(
        main,
        ["compile", "-", "-t", "value of B", "--json", "-s", "tomc"],
        input=json.dumps(messages),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["sources"][1]["role"] == "assistant"
    assert any(row["key"] == "B" and row["value"] == "1" for row in data["ledger"])


def test_errors_are_messages_not_tracebacks() -> None:
    runner = CliRunner()
    empty = runner.invoke(main, ["compile", "-", "-t", "q"], input="\n\n")
    assert empty.exit_code != 0 and "history is empty" in empty.output
    assert "Traceback" not in empty.output
    binary = runner.invoke(main, ["compile", "-", "-t", "q"], input=b"\xff\xfe\x00garbage")
    assert binary.exit_code != 0 and "not UTF-8" in binary.output
    big = runner.invoke(main, ["compile", "-", "-t", "q"], input="word\n" * 50_000)
    assert big.exit_code != 0 and "200,000" in big.output and "--max-chars 0" in big.output
    nested = runner.invoke(
        main, ["compile", "-", "-t", "q", "--max-chars", "0"], input="[" * 100_000
    )
    assert nested.exit_code == 0 and nested.exception is None  # plain text, not a RecursionError
    lifted = runner.invoke(
        main, ["compile", "-", "-t", "q", "--max-chars", "0", "-b", "10"], input="word\n" * 50_000
    )
    assert lifted.exit_code == 0


def test_console_script_runs_as_a_process() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tomc.cli",
            "compile",
            str(EXAMPLE),
            "-t",
            "relation: assigned > owns",
            "-s",
            "tomc",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "RELATION alice -[assigned]-> release-team -[owns]-> deploy-pipeline (u2,u3)" in proc.stdout
    )
