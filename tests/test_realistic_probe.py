"""The realistic fidelity probe holds what it promises: real text, twenty values in as many
formats, each printed once, seven set again later in the same format and context, a task that
names them in plain words only, the same bytes from the same Python, and a score that counts
right. The last test runs it through the scripted upstream and the offline replay (no CLI)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_cost_replay import replay_masked, replay_through_tomc
from agent_upstream import FINAL_MARK, AgentRequest, AgentUpstream, Script, probe_script
from real_agents import RunResult
from realistic_probe import (
    EDITED,
    PLANTS,
    RealisticScript,
    probe_score,
    realistic_script,
)

SESSIONS = (24, 42, 56)  # short (values two to a file), and the matrix's usual lengths
CHARS = 6_000


@pytest.fixture(scope="module", params=SESSIONS)
def session(request: pytest.FixtureRequest) -> tuple[RealisticScript, dict[int, str]]:
    script = realistic_script(request.param, CHARS)
    return script, {step: script.file_text(step) for step in range(1, script.steps + 1)}


def _settings() -> list[str]:
    return [p.value for p in PLANTS] + [p.later for p in PLANTS if p.later]


def test_twenty_values_in_at_least_fifteen_formats_one_each() -> None:
    assert len(PLANTS) == 20
    assert len({p.fmt for p in PLANTS}) == len(PLANTS) >= 15
    assert len({p.kind for p in PLANTS}) >= 8  # logs, YAML, docs, code, TOML, INI, env, HTTP...
    assert sum(1 for p in PLANTS if p.later) == 7
    assert len(EDITED) == len(set(EDITED)) == 8


def test_values_are_unique_and_no_setting_is_inside_another() -> None:
    settings = _settings()
    assert len(settings) == len(set(settings)) == 27
    for a in settings:
        for b in settings:
            assert a == b or a not in b, (a, b)
    for value in settings:  # nothing a request body's JSON would escape
        assert not set(value) & set('"\\\n'), value


def test_each_value_is_printed_once_in_its_own_file(
    session: tuple[RealisticScript, dict[int, str]],
) -> None:
    script, texts = session
    task = script.task()
    for plant in PLANTS:
        found = [step for step, text in texts.items() if plant.value in text]
        assert len(found) == 1 and texts[found[0]].count(plant.value) == 1, (plant.name, found)
        assert found[0] < script.steps // 2  # before the changes
        assert plant.value not in task
        if plant.later is None:
            assert plant.name not in script.changes
            continue
        at, later = script.changes[plant.name]
        assert later == plant.later and later not in task
        assert [step for step, text in texts.items() if later in text] == [at]
        assert texts[at].count(later) == 1 and found[0] < at
    assert script.current() == {p.name: p.later or p.value for p in PLANTS}


_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*")


def test_the_task_names_every_value_in_plain_words_and_no_key_verbatim() -> None:
    script = realistic_script(42, CHARS)
    task = script.task().lower()
    for plant in PLANTS:
        assert plant.words.lower() in task
        assert plant.name.lower() not in task
        keys = _IDENTIFIER.findall(plant.template.replace("@V", " "))
        assert keys or plant.kind == "md", plant.name
        for key in keys:
            assert key.lower() not in task, (plant.name, key)
    for section in re.findall(r"^\[[^\]]+\]", "\n".join(p.template for p in PLANTS), re.M):
        assert section.lower() not in task
    assert FINAL_MARK in script.task()
    assert not any(path in script.task() for path in EDITED)


def _context_lines(plant: Any, value: str) -> list[str]:
    """The lines of a value's snippet, without the log timestamps that differ by file."""
    pieces = re.split("@LOGTIME|@ISOTIME", plant.render(value))
    return [line for piece in pieces for line in piece.split("\n") if line.strip()]


def test_a_changed_value_keeps_its_format_and_context(
    session: tuple[RealisticScript, dict[int, str]],
) -> None:
    script, texts = session
    for plant in PLANTS:
        if plant.later is None:
            continue
        assert plant.render(plant.later) == plant.render(plant.value).replace(
            plant.value, plant.later
        )
        first = next(step for step, text in texts.items() if plant.value in text)
        at = script.changes[plant.name][0]
        for step, value in ((first, plant.value), (at, plant.later)):
            for line in _context_lines(plant, value):
                assert line in texts[step], (plant.name, step, line)
        if script.steps >= 42:  # one value to a file: the later file is of the same kind
            assert Path(script.file_name(at)).suffix == Path(script.file_name(first)).suffix


def test_every_call_has_a_path_of_its_own(
    session: tuple[RealisticScript, dict[int, str]],
) -> None:
    script, texts = session
    paths = [script.file_name(step) for step in range(1, script.steps + 1)]
    edited = list(script.edits.values())
    assert len(set(paths)) == len(paths) and len(set(edited)) == 8
    every = paths + edited
    for path in every:
        assert sum(1 for other in every if path in other) == 1, path
        assert not any(path in text for text in texts.values()), path
        assert path not in script.task()
    assert all(f"cat {path}" in script.command(step) for step, path in enumerate(paths, 1))
    for step, path in script.edits.items():
        assert path in script.command(step)
    assert len({Path(p).suffix for p in paths}) >= 6  # .py .log .md .yaml .http .toml ...


def test_files_are_real_text_of_the_requested_size(
    session: tuple[RealisticScript, dict[int, str]],
) -> None:
    _, texts = session
    for step, text in texts.items():
        assert 0.9 * CHARS <= len(text) <= CHARS, (step, len(text))
    joined = "\n".join(texts.values())
    assert "def " in joined and "Return" in joined  # standard library code and docstrings
    depths = []
    for plant in PLANTS:
        text = next(t for t in texts.values() if plant.value in t)
        depths.append(text[: text.index(plant.value)].count("\n"))
    assert sum(1 for d in depths if d >= 5) >= 15  # most values sit well inside their file
    assert len(set(depths)) >= 15


_HASH_ALL = (
    "import hashlib, sys; sys.path.insert(0, 'tests'); "
    "from realistic_probe import realistic_script; s = realistic_script(42, 6000); "
    "print(hashlib.sha256(''.join(s.file_text(i) for i in range(1, 43)).encode()).hexdigest())"
)


def test_the_same_python_gives_byte_identical_files() -> None:
    script = realistic_script(42, CHARS)
    here = hashlib.sha256("".join(script.file_text(i) for i in range(1, 43)).encode())
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", _HASH_ALL], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == here.hexdigest()


def _body(script: Script, outputs: list[tuple[int, str]]) -> dict[str, Any]:
    """A Messages request body: one Bash call per step, its output as the tool result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": script.task()}]
    for step, output in outputs:
        call = {"type": "tool_use", "id": f"t{step}", "name": "Bash"}
        call["input"] = {"command": script.command(step)}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"t{step}", "content": output}
        messages.append({"role": "user", "content": [result]})
    return {"model": "claude-opus-4-8", "messages": messages}


def test_the_score_counts_current_stale_only_calls_and_edits() -> None:
    script = realistic_script(42, CHARS)
    facts, changes = script.facts, script.changes
    changed = list(changes)
    unchanged = [n for n in facts if n not in changes]
    outputs = [
        (1, f"{facts[unchanged[0]]} and {facts[unchanged[1]]}"),  # two current values
        (2, f"stale {facts[changed[0]]}"),  # a changed value by its stale setting only
        (3, f"{facts[changed[1]]} then {changes[changed[1]][1]}"),  # stale and current: current
    ]
    body = _body(script, outputs)
    score = probe_score(script, body)
    assert (score.current, score.stale_only, score.calls_named) == (3, 1, 3)
    assert (score.values, score.changed, score.calls, score.edited) == (20, 7, 42, 8)
    assert score.edits == 1  # step 2's command edits a file
    assert probe_score(script, json.dumps(body, ensure_ascii=False)) == score
    # The same through a run's final request, and observation masking of it.
    final = AgentRequest(1, "POST", "/v1/messages", "", {}, body, 0, "anthropic", kind="main")
    final.final = True
    run = RunResult("claude", "direct", [], 0, FINAL_MARK, "", 0.0, [final], script)
    assert run.final_score() == score
    masked = run.masked_score(keep=1)  # only step 3's output stays
    assert (masked.current, masked.stale_only, masked.calls_named) == (1, 0, 3)


def test_the_synthetic_probe_is_scored_as_before() -> None:
    script = probe_script(24, 2_000)
    assert script.step_texts(3) == (
        "Next I read log file 3.",
        "Reading data/step_03.log.",
        "Print log file 3",
    )
    body = _body(script, [(1, script.file_text(1)), (2, script.file_text(2))])
    score = probe_score(script, body)
    # probe_limit_00 is set again later (stale here), probe_path_01 is current; the task names
    # data/step_01.log and data/step_24.log itself.
    assert (score.current, score.stale_only, score.calls_named) == (1, 1, 3)
    assert script.final_text("").startswith(f"{FINAL_MARK}. probe_limit_00 = unknown")


def _scripted_claude(script: Script) -> RunResult:
    """A loop like Claude Code's against the scripted upstream, without the CLI: each tool call
    answered with its file's text, until the final answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": script.task()}]
    tools = [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}]
    headers = {"x-claude-code-session-id": "11111111-2222-3333-4444-555555555555"}
    with AgentUpstream(script) as upstream, httpx.Client(timeout=60) as http:
        for _ in range(script.steps + 2):
            body = {"model": "claude-opus-4-8", "max_tokens": 512, "tools": tools}
            body["messages"] = messages
            reply = http.post(f"{upstream.root_url}/v1/messages", json=body, headers=headers)
            content = reply.json()["content"]
            messages = [*messages, {"role": "assistant", "content": content}]
            calls = [b for b in content if b["type"] == "tool_use"]
            if not calls:
                break
            path = calls[0]["input"]["command"].split()[1]
            result = {"type": "tool_result", "tool_use_id": calls[0]["id"]}
            result["content"] = script.file_text(int(upstream.requests[-1].step or 0))
            assert script.file_name(upstream.requests[-1].step or 0) == path
            messages.append({"role": "user", "content": [result]})
        requests = list(upstream.requests)
    answer = content[-1]["text"]
    return RunResult("claude", "direct", [], 0, answer, "", 0.0, requests, script)


def test_the_probe_through_the_upstream_and_the_offline_replay(tmp_path: Path) -> None:
    script = realistic_script(24, 1_500)
    direct = _scripted_claude(script)
    assert direct.finished and all(v in direct.stdout for v in script.current().values())
    assert direct.final_score().current == 20 and direct.final_score().calls_named == 24
    direct.save(tmp_path / "run.json.gz", {"cell": "test"})
    loaded, meta = RunResult.load(tmp_path / "run.json.gz", script)
    assert meta == {"cell": "test"} and loaded.final_score() == direct.final_score()
    assert loaded.billed_input == direct.billed_input
    # A session this small is under TOMC's target: the replay passes it through.
    replayed = replay_through_tomc(loaded)
    assert replayed.run is not None and replayed.run.final_score() == direct.final_score()
    assert replayed.billed_input == pytest.approx(direct.billed_input)
    masked = replay_masked(loaded, keep=10)
    assert masked.run is not None
    score = masked.run.final_score()
    assert score.calls_named == 24 and score.current < 20  # the early values are masked
    assert score == direct.masked_score(keep=10)
