"""The MCP server through the real ``mcp`` client: in-process and over stdio."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tomc import MAX_INTERACTIVE_CHARS, MAX_TASK_CHARS, compile_memory
from tomc._cli import main as cli_main
from tomc._core.inspector import render_inspection
from tomc._mcp.server import INSTRUCTIONS, MAX_REPORT_CHARS, create_server
from tomc._notebooks import NotebookStore
from windows_runtime import UNDER_WINE

TOOLS = {
    "prepare_context",
    "inspect_sources",
    "notebook_save",
    "notebook_recall",
    "notebook_list",
    "notebook_delete",
}

# A project log: typed updates buried among filler, so a small budget must choose.
FILLER = [
    f"standup {i}: reviewed tickets, nothing blocking, coffee machine fixed" for i in range(80)
]
LOG = "\n".join(
    [
        "deploy_target = staging",
        "alice -[assigned]-> payments",
        "payments -[owns]-> ledger-service",
        *FILLER[:40],
        "deploy_target = prod",
        "rollback_window = 30 minutes",
        "backup_target copies deploy_target",
        "the archive bucket moved to cold-storage-eu on Tuesday",
        *FILLER[40:],
    ]
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private TOMC_HOME: no test may touch the real user data directory."""
    path = tmp_path / "tomc-home"
    monkeypatch.setenv("TOMC_HOME", str(path))
    return path


def run_in_process(
    home: Path, body: Callable[[Client], Awaitable[Any]], **server_options: Any
) -> Any:
    """Connect the real client to a fresh in-process server over the store at ``home``."""

    async def main() -> Any:
        async with Client(create_server(NotebookStore(home), **server_options)) as client:
            return await body(client)

    return anyio.run(main)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured output."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    # The text content carries the same data for clients that ignore structured output.
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail as a tool error; return the message the model sees."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return "\n".join(block.text for block in result.content)


# -- listing -------------------------------------------------------------------------------


def test_tools_are_listed_with_descriptions_and_schemas(home: Path) -> None:
    async def body(client: Client) -> None:
        assert client.instructions == INSTRUCTIONS
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and "Use it" in tool.description, tool.name
            assert tool.output_schema is not None, tool.name
            assert tool.input_schema["type"] == "object"

        prepare = tools["prepare_context"]
        props = prepare.input_schema["properties"]
        assert prepare.input_schema["required"] == ["history", "task"]
        assert set(props) == {"history", "task", "budget_tokens", "strategy", "counter"}
        assert props["strategy"]["enum"] == ["auto", "tomc", "tomc_raw", "rag"]
        assert props["strategy"]["default"] == "auto"
        assert set(props["counter"]["enum"]) == {"lexical", "bpe:o200k_base", "bpe:cl100k_base"}
        assert "compiled_memory" in prepare.output_schema["properties"]
        assert prepare.annotations is not None and prepare.annotations.read_only_hint

        save = tools["notebook_save"]
        assert save.input_schema["properties"]["mode"]["enum"] == ["append", "replace"]
        assert save.input_schema["required"] == ["name", "text"]
        assert set(tools["notebook_recall"].input_schema["required"]) == {"name", "task"}
        assert tools["notebook_list"].input_schema.get("properties", {}) == {}
        assert tools["notebook_delete"].annotations.destructive_hint

    run_in_process(home, body)


def test_instructions_state_the_policy() -> None:
    text = INSTRUCTIONS.lower()
    assert "host keeps its own chat" in text
    assert "does not intercept" in text
    assert "never save compiled memory" in text
    assert f"{MAX_INTERACTIVE_CHARS:,}" in INSTRUCTIONS
    assert f"{MAX_TASK_CHARS:,}" in INSTRUCTIONS


# -- compiling -----------------------------------------------------------------------------


def test_prepare_context_matches_the_library(home: Path) -> None:
    task = "What is the current value of backup_target?"
    expected = compile_memory(LOG, task, budget_tokens=60, strategy="tomc_raw")

    async def body(client: Client) -> dict[str, Any]:
        return await call(
            client, "prepare_context", history=LOG, task=task, budget_tokens=60, strategy="tomc_raw"
        )

    out = run_in_process(home, body)
    assert out["compiled_memory"] == expected.compiled_memory
    assert "STATE backup_target = prod" in out["compiled_memory"]
    assert out["route"] == expected.route == "state"
    assert out["applied_strategy"] == "tomc_raw"
    assert out["memory_tokens"] == expected.memory_tokens <= 60
    assert out["input_tokens"] == expected.input_tokens
    assert out["source_units"] == len(expected.sources)
    summary = out["ledger_summary"]
    assert summary["source"]["candidates"] == len(expected.sources)
    assert sum(kind["included_tokens"] for kind in summary.values()) == out["memory_tokens"]
    assert "never save this memory" in out["note"]
    assert not (home / "notebooks.sqlite3").exists()  # no notebook use, no store file


def test_prepare_context_accepts_chat_messages(home: Path) -> None:
    messages = [
        {"role": "user", "content": "A = 3"},
        {"role": "assistant", "content": "B copies A"},
        {"role": "user", "content": [{"type": "text", "text": "A = 8"}]},
    ]

    async def body(client: Client) -> dict[str, Any]:
        return await call(
            client, "prepare_context", history=messages, task="What is B?", strategy="tomc"
        )

    out = run_in_process(home, body)
    assert (
        out["compiled_memory"]
        == compile_memory(messages, "What is B?", strategy="tomc").compiled_memory
    )
    assert "STATE B = 3" in out["compiled_memory"]


def test_inspect_sources_reports_kept_omitted_and_cited(home: Path) -> None:
    task = "What is the current value of backup_target?"
    expected = compile_memory(LOG, task, budget_tokens=60, strategy="tomc_raw")

    async def body(client: Client) -> dict[str, Any]:
        return await call(
            client,
            "inspect_sources",
            history=LOG,
            task=task,
            budget_tokens=60,
            strategy="tomc_raw",
            max_rows=5,
        )

    out = run_in_process(home, body)
    included = expected.included_rows
    assert len(included) > 5
    assert [row["text"] for row in out["kept"]] == [r.text for r in included[:5]]
    assert out["kept"][0]["kind"] == "state"  # typed records lead
    assert out["kept_total"] == len(included)
    assert out["omitted_total"] == len(expected.ledger) - len(included)
    assert len(out["omitted"]) == 5
    assert all(row["reason"] for row in out["omitted"])
    # Omitted source lines come nearest-miss first: highest BM25 score of all omitted lines.
    omitted_sources = [r for r in expected.ledger if r.kind == "source" and not r.included]
    scores = [float(row["value"]) for row in out["omitted"] if row["kind"] == "source"]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == max(float(r.value) for r in omitted_sources)
    cited = {source["text"] for source in out["cited_sources"]}
    # backup_target = prod is supported by the later SET of deploy_target and the COPY line.
    assert {"deploy_target = prod", "backup_target copies deploy_target"} <= cited

    # The same report as the library's inspector, apart from the measured latency.
    def steady(report: str) -> list[str]:
        return [line for line in report.splitlines() if not line.startswith("latency:")]

    assert steady(out["inspection"]) == steady(render_inspection(expected, include_memory=False))
    assert len(steady(out["inspection"])) > 20


def test_inspection_report_is_cut_for_long_histories(home: Path) -> None:
    long_log = "\n".join(f"line {i}: status ok for service {i % 17}" for i in range(3_000))

    async def body(client: Client) -> dict[str, Any]:
        # An explicit budget above the tools' default cap: thousands of kept rows.
        return await call(
            client,
            "inspect_sources",
            history=long_log,
            task="service 3 status",
            budget_tokens=18_000,
        )

    out = run_in_process(home, body)
    assert len(out["inspection"]) < MAX_REPORT_CHARS + 200
    assert "report cut here" in out["inspection"]
    assert out["kept_total"] > 2_000 and out["omitted_total"] > 300
    assert len(out["omitted"]) == len(out["kept"]) == 40
    # The whole response stays small enough for a model's context.
    assert len(json.dumps(out)) < 40_000


# -- errors --------------------------------------------------------------------------------


def test_errors_are_tool_errors_that_say_what_to_change(home: Path) -> None:
    async def body(client: Client) -> dict[str, str]:
        messages = {
            "too_large": await call_error(
                client, "prepare_context", history="x" * (MAX_INTERACTIVE_CHARS + 1), task="t"
            ),
            "budget": await call_error(
                client, "prepare_context", history=LOG, task="t", budget_tokens=-1
            ),
            "strategy": await call_error(
                client, "prepare_context", history=LOG, task="t", strategy="best"
            ),
            "counter": await call_error(
                client, "inspect_sources", history=LOG, task="t", counter="words"
            ),
            "empty_task": await call_error(client, "prepare_context", history=LOG, task="  "),
            "empty_history": await call_error(client, "prepare_context", history="\n\n", task="t"),
            "bad_part": await call_error(
                client,
                "prepare_context",
                history=[{"role": "user", "content": [{"type": "image_url", "url": "x"}]}],
                task="t",
            ),
            "unknown_notebook": await call_error(client, "notebook_recall", name="nope", task="t"),
            "delete_unknown": await call_error(client, "notebook_delete", name="nope"),
            "bad_name": await call_error(client, "notebook_save", name="../x", text="a = 1"),
            "empty_text": await call_error(client, "notebook_save", name="n", text=" \n"),
            "bad_mode": await call_error(
                client, "notebook_save", name="n", text="a", mode="prepend"
            ),
            "missing_arg": await call_error(client, "prepare_context", history=LOG),
        }
        # The server is still serving after all of that.
        ok = await call(client, "prepare_context", history="A = 1", task="What is A?")
        assert "A = 1" in ok["compiled_memory"]
        return messages

    messages = run_in_process(home, body)
    assert "interactive limit of 200,000" in messages["too_large"]
    assert "split the history" in messages["too_large"]
    assert (
        "budget_tokens" in messages["budget"] and "greater than or equal to 0" in messages["budget"]
    )
    assert "'auto', 'tomc', 'tomc_raw' or 'rag'" in messages["strategy"]
    assert "'lexical'" in messages["counter"]
    assert "task is empty" in messages["empty_task"]
    assert "history is empty" in messages["empty_history"]
    assert "only text parts" in messages["bad_part"]
    assert "no notebook named 'nope'" in messages["unknown_notebook"]
    assert "save some text first" in messages["unknown_notebook"]
    assert "no notebook named 'nope'" in messages["delete_unknown"]
    assert "letters, digits" in messages["bad_name"]
    assert "nothing to save" in messages["empty_text"]
    assert "'append' or 'replace'" in messages["bad_mode"]
    assert "'task' is required" in messages["missing_arg"]
    for message in messages.values():
        assert "Traceback" not in message


def test_prepare_context_reads_a_json_chat_string_as_chat(home: Path) -> None:
    messages = [
        {"role": "user", "content": "A = 3"},
        {"role": "assistant", "content": "B copies A"},
    ]
    document = json.dumps({"deploy_target": "prod", "owner": "alice"}, indent=1)

    async def body(client: Client) -> tuple[dict[str, Any], ...]:
        as_text = await call(
            client, "inspect_sources", history=json.dumps(messages), task="B?", strategy="tomc"
        )
        as_list = await call(
            client, "inspect_sources", history=messages, task="B?", strategy="tomc"
        )
        # A JSON document that is not a chat list is source text like any other.
        doc = await call(client, "prepare_context", history=document, task="owner?", strategy="rag")
        return as_text, as_list, doc

    as_text, as_list, doc = run_in_process(home, body)

    def without_latency(result: dict[str, Any]) -> dict[str, Any]:
        lines = result["inspection"].splitlines()
        return {**result, "inspection": [line for line in lines if not line.startswith("latency")]}

    assert without_latency(as_text) == without_latency(as_list)
    assert [source["role"] for source in as_text["cited_sources"]] == ["user", "assistant"]
    assert '"owner": "alice"' in doc["compiled_memory"]


def test_absurd_numbers_and_bad_unicode_are_named(home: Path) -> None:
    async def body(client: Client) -> dict[str, str]:
        return {
            "huge": await call_error(
                client, "prepare_context", history=LOG, task="t", budget_tokens=10**400
            ),
            "surrogate": await call_error(
                client, "prepare_context", history="a = 1\ud800", task="a?"
            ),
            "long_task": await call_error(
                client, "prepare_context", history=LOG, task="x" * (MAX_TASK_CHARS + 1)
            ),
        }

    messages = run_in_process(home, body)
    assert "budget_tokens" in messages["huge"] and "less than or equal to" in messages["huge"]
    assert "unpaired surrogate (U+D800)" in messages["surrogate"]
    assert "task has 10,001 characters" in messages["long_task"]


def test_unexpected_errors_name_the_type_and_the_step(home: Path) -> None:
    def counter_crash(*args: Any, **kwargs: Any) -> None:
        raise ValueError("Input too large for the BPE encoder")

    async def body(client: Client) -> tuple[str, str]:
        await call(client, "notebook_save", name="log", text=LOG)
        return (
            await call_error(client, "prepare_context", history=LOG, task="t"),
            await call_error(client, "notebook_recall", name="log", task="t"),
        )

    prepared, recalled = run_in_process(home, body, compile_fn=counter_crash)
    assert "unexpected ValueError while compiling the history" in prepared
    assert "Input too large for the BPE encoder" in prepared
    assert "unexpected ValueError while recalling notebook 'log'" in recalled


def test_a_broken_store_is_named_by_every_notebook_tool(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("x")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "notebooks.sqlite3").write_bytes(b"this is not SQLite" * 100)

    async def body(client: Client) -> list[str]:
        out = [
            await call_error(client, "notebook_list"),
            await call_error(client, "notebook_save", name="n", text="a = 1"),
            await call_error(client, "notebook_recall", name="n", task="a?"),
            await call_error(client, "notebook_delete", name="n"),
        ]
        # Compiling needs no store and still works.
        await call(client, "prepare_context", history="a = 1", task="a?")
        return out

    cases = ((not_a_folder, "it is a file, not a folder"), (corrupt, "not a readable"))
    for home, problem in cases:
        for message in run_in_process(home, body):
            assert str(home) in message and problem in message, message
            assert "TOMC_HOME" in message
            assert message.strip() != "Error executing tool"


# -- notebooks -----------------------------------------------------------------------------


def test_notebook_round_trip_in_process(home: Path) -> None:
    first = "deploy_target = staging\r\nowner = Zoë 张\r\n"
    second = "deploy_target = prod"

    async def body(client: Client) -> dict[str, Any]:
        saved = await call(client, "notebook_save", name="project", text=first)
        assert saved["seq"] == 1 and saved["mode"] == "append"
        assert saved["chars"] == len(first)
        assert saved["size_bytes"] == len(first.encode())
        saved = await call(client, "notebook_save", name="project", text=second)
        assert saved["seq"] == 2
        assert saved["notebook"]["entries"] == 2
        await call(client, "notebook_save", name="other", text="x = 1")
        listing = await call(client, "notebook_list")
        assert [n["name"] for n in listing["notebooks"]] == ["other", "project"]
        assert listing["store"] == str(home / "notebooks.sqlite3")
        recalled = await call(
            client,
            "notebook_recall",
            name="project",
            task="What is deploy_target?",
            strategy="tomc_raw",
            budget_tokens=30,
        )
        deleted = await call(client, "notebook_delete", name="other")
        assert deleted == {"name": "other", "entries_removed": 1}
        assert await call_error(client, "notebook_recall", name="other", task="t")
        return recalled

    recalled = run_in_process(home, body)
    store = NotebookStore(home)
    # Stored verbatim: byte-identical entries, CRLF and all.
    assert [e.text for e in store.entries("project")] == [first, second]
    # Recall compiles the stored original text for the task.
    expected = compile_memory(
        store.text("project"), "What is deploy_target?", budget_tokens=30, strategy="tomc_raw"
    )
    assert recalled["compiled_memory"] == expected.compiled_memory
    # Three short lines: a memory with records would cost more, so they come back as they are.
    assert expected.applied_strategy == "unchanged"
    assert "deploy_target = prod" in recalled["compiled_memory"]
    assert recalled["notebook"]["name"] == "project"
    assert recalled["notebook"]["entries"] == 2


def test_replace_mode_keeps_only_the_new_text(home: Path) -> None:
    async def body(client: Client) -> None:
        await call(client, "notebook_save", name="n", text="old = 1")
        out = await call(client, "notebook_save", name="n", text="new = 2", mode="replace")
        assert out["seq"] == 1 and out["notebook"]["entries"] == 1

    run_in_process(home, body)
    assert NotebookStore(home).text("n") == "new = 2"


def test_recall_compiles_fresh_for_each_task(home: Path) -> None:
    """A later task recovers evidence that an earlier task's memory left out."""
    evidence = "the archive bucket moved to cold-storage-eu on Tuesday"

    async def body(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        await call(client, "notebook_save", name="log", text=LOG)
        first = await call(
            client,
            "notebook_recall",
            name="log",
            task="What is deploy_target?",
            budget_tokens=25,
            strategy="tomc_raw",
        )
        second = await call(
            client,
            "notebook_recall",
            name="log",
            task="Where did the archive bucket move?",
            budget_tokens=25,
            strategy="tomc_raw",
        )
        return first, second

    first, second = run_in_process(home, body)
    assert evidence not in first["compiled_memory"]
    assert evidence in second["compiled_memory"]


def test_compiled_memory_cannot_be_saved_as_source(home: Path) -> None:
    async def body(client: Client) -> dict[str, str]:
        await call(client, "notebook_save", name="log", text=LOG)
        recalled = await call(
            client, "notebook_recall", name="log", task="What is deploy_target?", budget_tokens=40
        )
        prepared = await call(
            client, "prepare_context", history=LOG, task="Who owns what?", budget_tokens=40
        )
        assert recalled["applied_strategy"] != "unchanged"
        assert prepared["applied_strategy"] != "unchanged"
        return {
            "recalled": await call_error(
                client, "notebook_save", name="log", text=recalled["compiled_memory"]
            ),
            "prepared": await call_error(
                client, "notebook_save", name="new", text="\n" + prepared["compiled_memory"]
            ),
            "recalled_text": recalled["compiled_memory"],
        }

    out = run_in_process(home, body)
    assert "compiled by TOMC" in out["recalled"] and "original" in out["recalled"]
    assert "compiled by TOMC" in out["prepared"]
    store = NotebookStore(home)
    assert [e.text for e in store.entries("log")] == [LOG]
    assert [n.name for n in store.list()] == ["log"]

    # Recall fingerprints live in the store: a restarted server refuses them too.
    async def after_restart(client: Client) -> str:
        return await call_error(client, "notebook_save", name="x", text=out["recalled_text"])

    assert "compiled by TOMC" in run_in_process(home, after_restart)


def test_an_unchanged_history_is_still_original_and_can_be_saved(home: Path) -> None:
    """With auto, a history that fits is returned as is; that text is the original."""
    history = "A = 1\nB copies A"

    async def body(client: Client) -> dict[str, Any]:
        out = await call(client, "prepare_context", history=history, task="What is B?")
        assert out["applied_strategy"] == "unchanged"
        assert out["compiled_memory"] == history
        return await call(client, "notebook_save", name="small", text=out["compiled_memory"])

    assert run_in_process(home, body)["seq"] == 1


def test_a_notebook_that_could_not_be_recalled_is_never_saved(home: Path) -> None:
    chat = json.dumps(
        [{"role": "user", "content": "A = 3"}, {"role": "user", "content": "B copies A"}]
    )

    async def body(client: Client) -> tuple[dict[str, str], dict[str, Any]]:
        refused = {
            "nul": await call_error(client, "notebook_save", name="n", text="a = 1\x00"),
            "no_role": await call_error(client, "notebook_save", name="n", text='[{"a": 1}]'),
            "escape": await call_error(
                client, "notebook_save", name="n", text='[{"role": "user", "content": "\\ud800"}]'
            ),
        }
        # Two entries that only together read as a broken chat list: refused at the second.
        await call(client, "notebook_save", name="split", text='[{"a":')
        refused["joined"] = await call_error(client, "notebook_save", name="split", text="1}]")
        # A saved chat list is recalled as chat, the same reading as prepare_context.
        await call(client, "notebook_save", name="chat", text=chat)
        recalled = await call(client, "notebook_recall", name="chat", task="B?", strategy="tomc")
        return refused, recalled

    refused, recalled = run_in_process(home, body)
    assert "NUL byte at character 5" in refused["nul"]
    assert "could not be recalled" in refused["no_role"] and "no 'role'" in refused["no_role"]
    assert "unpaired surrogate" in refused["escape"]
    assert "could not be recalled" in refused["joined"]
    assert recalled["compiled_memory"].startswith("STATE B = 3 (u0,u1)")
    store = NotebookStore(home)
    assert [n.name for n in store.list()] == ["chat", "split"]
    assert store.text("split") == '[{"a":'


def test_a_full_notebook_recalls_with_any_task(home: Path) -> None:
    text = ("x = 1\n" * (MAX_INTERACTIVE_CHARS // 6 + 1))[:MAX_INTERACTIVE_CHARS]

    async def body(client: Client) -> dict[str, Any]:
        await call(client, "notebook_save", name="full", text=text)
        return await call(
            client, "notebook_recall", name="full", task="x" * MAX_TASK_CHARS, budget_tokens=10
        )

    assert run_in_process(home, body)["notebook"]["chars"] == MAX_INTERACTIVE_CHARS


def test_notebook_over_the_interactive_limit_is_refused(home: Path) -> None:
    half = "y" * (MAX_INTERACTIVE_CHARS // 2)

    async def body(client: Client) -> str:
        await call(client, "notebook_save", name="big", text=half)
        return await call_error(client, "notebook_save", name="big", text=half + "z")

    message = run_in_process(home, body)
    assert "interactive limit" in message and "new notebook" in message
    assert NotebookStore(home).info("big").entries == 1


# -- the CLI over the same store -----------------------------------------------------------


def test_cli_notebook_commands_read_what_the_server_wrote(home: Path) -> None:
    text = "first line\r\nsecond = 2 ✓\n"

    async def body(client: Client) -> None:
        await call(client, "notebook_save", name="shared", text=text)
        await call(client, "notebook_save", name="gone", text="x")

    run_in_process(home, body)
    runner = CliRunner()

    listed = runner.invoke(cli_main, ["notebook", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [n["name"] for n in json.loads(listed.output)["notebooks"]] == ["gone", "shared"]

    shown = runner.invoke(cli_main, ["notebook", "show", "shared"])
    assert shown.exit_code == 0
    assert shown.stdout_bytes == text.encode("utf-8")

    exported = runner.invoke(cli_main, ["notebook", "export", "shared"])
    assert exported.exit_code == 0
    data = json.loads(exported.output)
    assert data["notebooks"][0]["entries"][0]["text"] == text

    refused = runner.invoke(cli_main, ["notebook", "delete", "gone"], input="n\n")
    assert refused.exit_code != 0
    assert [n.name for n in NotebookStore(home).list()] == ["gone", "shared"]
    deleted = runner.invoke(cli_main, ["notebook", "delete", "gone", "--yes"])
    assert deleted.exit_code == 0
    assert [n.name for n in NotebookStore(home).list()] == ["shared"]

    missing = runner.invoke(cli_main, ["notebook", "show", "gone"])
    assert missing.exit_code == 1
    assert "no notebook named 'gone'" in missing.output


def test_cli_home_option_overrides_the_environment(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-home"
    NotebookStore(other).append("elsewhere", "a = 1")
    out = CliRunner().invoke(cli_main, ["notebook", "--home", str(other), "list"])
    assert out.exit_code == 0
    assert out.output.startswith("elsewhere\t1 entries")


# -- over stdio, as a host runs it ---------------------------------------------------------


def _stdio(home: Path, command: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=command[0], args=command[1:], env={"TOMC_HOME": str(home)})


def _entry_point() -> list[str]:
    python = Path(sys.executable)
    if sys.platform == "win32":
        for script in (python.with_name("tomc.exe"), python.parent / "Scripts" / "tomc.exe"):
            if script.is_file():
                return [str(script), "mcp"]
        # make test-windows: Linux pip installed the wheels, and it writes no .exe launchers.
        assert UNDER_WINE, f"the tomc entry point is not installed with {sys.executable}"
        return [sys.executable, "-m", "tomc", "mcp"]
    script = python.with_name("tomc")
    assert script.is_file(), f"the tomc entry point is not installed next to {sys.executable}"
    return [str(script), "mcp"]


def test_stdio_server_lists_calls_and_keeps_notebooks_across_restarts(
    home: Path,
) -> None:
    async def first_run() -> dict[str, Any]:
        async with Client(_stdio(home, _entry_point())) as client:
            assert client.instructions == INSTRUCTIONS
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == TOOLS
            prepared = await call(
                client, "prepare_context", history=LOG, task="Who is assigned?", budget_tokens=40
            )
            assert prepared["route"] == "relation"
            inspected = await call(
                client, "inspect_sources", history=LOG, task="Who is assigned?", budget_tokens=40
            )
            assert inspected["kept"]
            message = await call_error(client, "notebook_recall", name="log", task="t")
            assert "no notebook named 'log'" in message
            await call(client, "notebook_save", name="log", text=LOG)
            return await call(client, "notebook_save", name="log", text="rollback_window = 5 min")

    async def second_run() -> dict[str, Any]:
        # Restarted with the module entry instead of the script: same store, same notebooks.
        command = [sys.executable, "-m", "tomc._cli", "mcp"]
        async with Client(_stdio(home, command)) as client:
            listing = await call(client, "notebook_list")
            assert [(n["name"], n["entries"]) for n in listing["notebooks"]] == [("log", 2)]
            recalled = await call(
                client,
                "notebook_recall",
                name="log",
                task="What is rollback_window?",
                strategy="tomc",
            )
            deleted = await call(client, "notebook_delete", name="log")
            assert deleted["entries_removed"] == 2
            return recalled

    saved = anyio.run(first_run)
    assert saved["seq"] == 2
    recalled = anyio.run(second_run)
    assert "STATE rollback_window = 5 min" in recalled["compiled_memory"]
    assert NotebookStore(home).list() == ()


@pytest.mark.parametrize("args", [["--home"], []])
def test_stdio_home_flag(home: Path, tmp_path: Path, args: list[str]) -> None:
    """``tomc mcp --home DIR`` and ``TOMC_HOME`` both choose the store."""
    chosen = tmp_path / "flag-home" if args else home
    command = [*_entry_point(), *args, *([str(chosen)] if args else [])]

    async def run() -> None:
        async with Client(_stdio(home, command)) as client:
            await call(client, "notebook_save", name="where", text="here = 1")

    anyio.run(run)
    assert NotebookStore(chosen).text("where") == "here = 1"


def test_stdio_front_answers_the_handshake_as_the_sdk_does() -> None:
    """``tomc mcp`` answers initialize and tools/list from mcp_manifest.json before the SDK
    loads; the manifest must be the live server's own answers (regenerate it with
    ``python -m tomc._mcp.stdio`` after changing a tool)."""
    from tomc._mcp.stdio import _load_manifest, build_manifest

    assert _load_manifest() == build_manifest(), "run: python -m tomc._mcp.stdio"
