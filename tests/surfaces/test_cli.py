from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tomc._cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "project_log.txt"


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
    # The memory comes first, under its own heading, then the inspector with its legend.
    assert re.match(
        r"MEMORY \(\d+ of 80 tokens\)\nSTATE deploy_target = production \(u11\)\n", result.output
    )
    assert "SOURCE UNITS" in result.output and "LEDGER" in result.output
    assert "[-] for a plain-text history" in result.output
    assert "     u0 [-] " in result.output


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
    big = runner.invoke(
        main, ["compile", "-", "-t", "q", "--max-chars", "200000"], input="word\n" * 50_000
    )
    assert big.exit_code == 1 and "over the --max-chars limit of 200,000" in big.output
    assert "--max-chars 0" in big.output and "interactive" not in big.output  # the user's limit
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
            "tomc._cli",
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


def test_the_limit_counts_the_history_and_the_task_has_its_own() -> None:
    runner = CliRunner()
    at_limit = ("x = 1\n" * 40_000)[:200_000]
    fits = runner.invoke(main, ["compile", "-", "-t", "x?" * 100, "-b", "5"], input=at_limit)
    assert fits.exit_code == 0, fits.output
    long_task = runner.invoke(main, ["compile", "-", "-t", "x" * 10_001], input="x = 1")
    assert long_task.exit_code == 1
    assert "task has 10,001 characters, over the limit of 10,000 for a task" in long_task.output
    assert "--max-chars limit" not in long_task.output  # the task's limit is not --max-chars


@pytest.mark.parametrize("budget", ["1" + "0" * 400, str(10**12 + 1), "-5"])
def test_bad_budgets_are_refused_naming_the_flag(budget: str) -> None:
    result = CliRunner().invoke(main, ["compile", "-", "-t", "a?", "-b", budget], input="a = 1")
    assert result.exit_code == 2
    assert "'--budget'" in result.output and "not in the range 0<=x<=1000000000000" in result.output
    assert "budget_tokens" not in result.output  # the library's name, not what the user typed
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "OverflowError" not in result.output


def test_negative_max_chars_is_refused() -> None:
    result = CliRunner().invoke(main, ["compile", "-", "-t", "a?", "--max-chars", "-1"], input="a")
    assert result.exit_code == 2
    assert "--max-chars" in result.output and "-1 is not in the range x>=0" in result.output


@pytest.mark.parametrize(
    ("args", "history", "why"),
    [
        (["-b", "0"], "a = 1\nb = 2", "the budget is 0 tokens"),
        (["-b", "3"], "one two three four five six seven", "the smallest candidate needs"),
        (["-b", "50", "-s", "tomc"], "just chatter\nnothing typed", "keeps typed records only"),
    ],
)
def test_an_empty_memory_is_explained_on_stderr(args: list[str], history: str, why: str) -> None:
    result = CliRunner().invoke(main, ["compile", "-", "-t", "what?", *args], input=history)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "the compiled memory is empty" in result.stderr and why in result.stderr


def test_a_lone_surrogate_in_a_chat_list_is_written_not_a_traceback() -> None:
    history = '[{"role": "user", "content": "a = 1\\ud800"}]'
    result = CliRunner().invoke(main, ["compile", "-", "-t", "a?", "-s", "tomc"], input=history)
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == b"STATE a = 1\\ud800 (u0)\n"


def test_an_unexpected_error_names_its_type_and_step(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("tomc._cli.compile_request", broken)
    result = CliRunner().invoke(main, ["compile", "-", "-t", "a?"], input="a = 1")
    assert result.exit_code == 4
    assert "unexpected ZeroDivisionError while compiling the history" in result.output
    assert "Traceback" not in result.output


def test_simulate_names_no_path_outside_the_repository() -> None:
    from tomc._cli import simulate_command

    locomo = next(p for p in simulate_command.params if p.name == "locomo")
    assert locomo.default is None
    source = (Path(__file__).resolve().parents[2] / "src" / "tomc" / "_cli.py").read_text()
    assert "../" not in source and "shared/data" not in source
    missing = CliRunner().invoke(main, ["simulate", "--quick", "--locomo", "/nonexistent.json"])
    assert missing.exit_code == 2 and "does not exist" in missing.output


# ---- tomc notebook save ---------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A notebook store of its own, never the user's."""
    path = tmp_path / "tomc-home"
    monkeypatch.setenv("TOMC_HOME", str(path))
    return path


def _run(args: list[str], stdin: bytes | str | None = None):
    return CliRunner().invoke(main, args, input=stdin)


def test_notebook_save_stores_stdin_and_a_file_byte_for_byte(home: Path) -> None:
    text = "a = 1\r\nb copies a\n  trailing spaces  \n"
    saved = _run(["notebook", "save", "log"], stdin=text.encode())
    assert saved.exit_code == 0, saved.output
    assert saved.stdout == ""  # the report is on stderr; stdout stays clean for pipes
    assert "saved log entry 1 (" in saved.stderr and "1 entry" in saved.stderr
    appended = _run(["notebook", "save", "log", str(EXAMPLE)])
    assert appended.exit_code == 0, appended.output
    assert "entry 2" in appended.stderr and "2 entries" in appended.stderr
    shown = _run(["notebook", "show", "log"])
    assert shown.stdout_bytes == text.encode() + EXAMPLE.read_bytes()

    from tomc._notebooks import NotebookStore

    assert [e.text for e in NotebookStore(home).entries("log")] == [
        text,
        EXAMPLE.read_text(encoding="utf-8"),
    ]


def test_notebook_save_replace_and_json(home: Path) -> None:
    assert _run(["notebook", "save", "log", "-"], stdin="a = 1\n").exit_code == 0
    assert _run(["notebook", "save", "log", "-"], stdin="a = 2\n").exit_code == 0
    replaced = _run(["notebook", "save", "log", "-", "--replace", "--json"], stdin="c = 3\n")
    assert replaced.exit_code == 0, replaced.output
    data = json.loads(replaced.stdout)
    assert data["mode"] == "replace" and data["seq"] == 1 and data["chars"] == 6
    assert data["notebook"]["entries"] == 1 and "text" not in data
    assert _run(["notebook", "show", "log"]).stdout == "c = 3\n"


def test_notebook_show_of_an_empty_store_names_the_save_command(home: Path) -> None:
    result = _run(["notebook", "show", "log"])
    assert result.exit_code == 1
    assert "tomc notebook save NAME FILE" in result.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        (["../x"], "a = 1", 1, "is not allowed"),  # the name is checked before stdin is read
        (["x"], "  \n\t", 1, "nothing to save"),
        (["x"], b"\xff\xfe", 1, "not UTF-8 text"),
        (["x"], "a\x00b", 1, "NUL byte"),
        (["x"], "x" * 200_001, 1, "200,000"),
        (["x", "/nonexistent/file.txt"], None, 2, "No such file"),  # click's usage error
        (["x", "-", "--mode", "append"], "a", 2, "No such option"),
    ],
)
def test_notebook_save_refusals_are_messages_with_the_error_table_codes(
    home: Path, args: list[str], stdin, code: int, message: str
) -> None:
    result = _run(["notebook", "save", *args], stdin=stdin)
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_notebook_save_that_would_overflow_names_the_replace_flag(home: Path) -> None:
    assert _run(["notebook", "save", "log"], stdin="x = 1\n" * 30_000).exit_code == 0
    result = _run(["notebook", "save", "log"], stdin="y = 1\n" * 10_000)
    assert result.exit_code == 1
    assert "--replace" in result.stderr and "mode='replace'" not in result.stderr
    replaced = _run(["notebook", "save", "log", "--replace"], stdin="y = 1\n" * 10_000)
    assert replaced.exit_code == 0, replaced.output


def test_notebook_save_refuses_a_memory_the_store_compiled(home: Path) -> None:
    from tomc._notebooks import NotebookStore

    memory = "STATE deploy_target = production (u11)\n"
    NotebookStore(home).remember_compiled(memory)  # as notebook_recall records its memories
    result = _run(["notebook", "save", "log"], stdin=memory)
    assert result.exit_code == 1 and "memory compiled by TOMC" in result.stderr


def test_notebook_save_in_an_unusable_store_exits_3(tmp_path: Path) -> None:
    home = tmp_path / "a-file"
    home.write_text("x")
    result = CliRunner().invoke(
        main, ["notebook", "save", "log"], input="a = 1", env={"TOMC_HOME": str(home)}
    )
    assert result.exit_code == 3 and f"cannot use {home}" in result.stderr


def test_notebook_save_is_recallable_by_the_mcp_tool_path(home: Path) -> None:
    from tomc._notebooks import NotebookStore
    from tomc._service import compile_notebook

    assert _run(["notebook", "save", "log", str(EXAMPLE)]).exit_code == 0
    compiled = compile_notebook(
        NotebookStore(home), "log", "What is the current value of deploy_target?", strategy="tomc"
    )
    assert "deploy_target = production" in compiled.result.compiled_memory


def test_install_hints_name_a_command_that_works_from_a_clone() -> None:
    from tomc._core.extras import install_hint, source_checkout

    hint = install_hint("bpe")
    assert "pip install 'tomc[bpe]'" not in hint
    assert sys.executable in hint and "-m pip install -e" in hint
    root = source_checkout()
    if root is not None:  # an editable install from this clone
        assert f"{root}[bpe]" in hint and "make install" in hint


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        ('{"url": "file:///home/ann/src/tomc", "dir_info": {}}', ("/home/ann/src/tomc", False)),
        (
            '{"url": "file:///C:/Users/Ann%20B/tomc", "dir_info": {"editable": true}}',
            ("C:/Users/Ann B/tomc", True),
        ),
        ('{"url": "file:///srv/t%C3%B6mc%20%E6%97%A5", "dir_info": {}}', ("/srv/tömc 日", False)),
        ('{"url": "https://example.org/tomc.whl", "archive_info": {}}', None),
        ('{"url": "file:///tmp/tomc-0.1-py3-none-any.whl", "archive_info": {}}', None),
        ("not json", None),
        (None, None),
    ],
)
def test_the_clone_a_plain_install_came_from_is_read_from_pep_610(recorded, expected) -> None:
    from pathlib import Path

    from tomc._core.extras import installed_from

    found = installed_from(recorded)
    assert found == (None if expected is None else (Path(expected[0]), expected[1]))


def test_install_hint_names_the_recorded_clone(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from tomc._core import extras

    monkeypatch.setattr(extras, "source_checkout", lambda: None)
    where = Path("/opt/my clone")
    monkeypatch.setattr(extras, "_recorded_install", lambda: (where, False))
    hint = extras.install_hint("bpe")
    # Quoted for the platform's shell: single quotes are no quotes to cmd.exe.
    quoted = f'"{where}[bpe]"' if sys.platform == "win32" else f"'{where}[bpe]'"
    assert hint.endswith(f"-m pip install {quoted}")
    assert "/path/to/your" not in hint


def test_json_and_inspect_together_are_a_usage_error() -> None:
    result = CliRunner().invoke(
        main, ["compile", str(EXAMPLE), "-t", "What is deploy_target?", "--json", "--inspect"]
    )
    assert result.exit_code == 2
    assert "--json and --inspect each print the whole result; give one" in result.output
    assert "Traceback" not in result.output


def test_a_file_is_not_held_to_the_interactive_limit() -> None:
    # 250,000 characters: over the web page's and the MCP server's 200,000, a file is fine.
    result = CliRunner().invoke(
        main, ["compile", "-", "-t", "word 49999", "-b", "20"], input="word\n" * 50_000
    )
    assert result.exit_code == 0, result.output
    shown = " ".join(CliRunner().invoke(main, ["compile", "--help"]).output.split())
    assert "--max-chars" in shown and "[default: 20000000;" in shown


def test_inspect_scales_to_a_long_history_unless_asked_for_all() -> None:
    # A COUNT of a common word cites every line that has it: thousands of ids on one line, and
    # a line per unit of a long log.
    history = "".join(f"event {k} finished ok\n" for k in range(400))
    args = ["compile", "-", "-t", "How many times does finished occur?", "-b", "200", "--inspect"]
    short = CliRunner().invoke(main, args, input=history)
    assert short.exit_code == 0, short.output
    (line,) = [x for x in short.output.splitlines() if "(400 units)" in x]
    assert "sources=u0,u1,u2,u3,u4,…,u395,u396,u397,u398,u399 (400 units)" in line
    full = CliRunner().invoke(main, [*args, "--all"], input=history)
    assert "sources=" + ",".join(f"u{k}" for k in range(400)) + " " in full.output
    assert all(f" u{k} [-] event {k} finished ok" in full.output for k in range(400))
    assert len(short.output.splitlines()) <= len(full.output.splitlines())
    alone = CliRunner().invoke(main, ["compile", "-", "-t", "q", "--all"], input="a = 1")
    assert alone.exit_code == 2 and "--all shapes the --inspect output" in alone.output


def test_inspect_sums_up_the_units_a_long_history_left_out() -> None:
    history = "".join(f"worker {k} heartbeat\n" for k in range(600)) + "db_host = db-9\n"
    args = ["compile", "-", "-t", "What is db_host?", "-b", "60", "--inspect"]
    result = CliRunner().invoke(main, args, input=history)
    assert result.exit_code == 0, result.output
    text = result.output
    # The line behind the record is listed (it supports it), kept or not.
    assert re.search(r"^(KEPT|    ) +u600 \[-\] db_host = db-9$", text, re.M), text[:2000]
    assert " u17 [-] worker 17 heartbeat" not in text  # left out, and not listed
    (summary,) = [x for x in text.splitlines() if "more left out, not listed:" in x]
    assert "over budget" in summary
    total = int(summary.split("… and ")[1].split(" more")[0].replace(",", ""))
    # --all lists every unit instead.
    every = CliRunner().invoke(main, [*args, "--all"], input=history).output
    assert " u17 [-] worker 17 heartbeat" in every and "not listed" not in every
    listed = sum(1 for x in text.splitlines() if re.match(r"^(KEPT|    ) +u\d+ \[", x))
    assert total + listed == 601


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    import click

    paths = [prefix]
    if isinstance(group, click.Group):
        for name, command in sorted(group.commands.items()):
            paths += _command_paths(command, (*prefix, name))
    return paths


def test_every_help_and_error_is_written_on_a_legacy_code_page(tmp_path: Path) -> None:
    """Piped on Windows, Python writes cp1252: no help text or message may fail to encode
    there (a character outside it is escaped, never a traceback)."""
    env = {**os.environ, "PYTHONIOENCODING": "cp1252"}
    env.pop("PYTHONUTF8", None)
    for path in _command_paths(main):
        done = subprocess.run(
            [sys.executable, "-m", "tomc", *path, "--help"],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (path, done.stderr)
    source = tmp_path / "history.txt"
    source.write_text("deploy_target = café → 中文\n", "utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "tomc", "compile", str(source), "--task", "deploy_target → ?"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "café → 中文".encode() in done.stdout  # the memory itself is UTF-8, unchanged
