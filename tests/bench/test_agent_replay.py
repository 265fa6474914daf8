"""The long-agent-loop benchmark must measure what it claims, on trajectories built here."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from benchmarks import agent_replay as ar
from benchmarks import trajectories as tj
from tomc import LexicalCounter
from tomc._simulation.simulate import _Pricer

COUNT = LexicalCounter().count  # exact and easy to reason about: "w1 w2 w3" is 3 tokens
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def agent_run(steps: int, words: int = 40, *, tools: list | None = None) -> tj.Trajectory:
    """System, task, then ``steps`` tool groups, every third with assistant text before it."""
    messages: list[dict] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in parser.py please."},
    ]
    for step in range(steps):
        if step % 3 == 2:
            messages.append({"role": "assistant", "content": f"thinking about step {step}"})
        call_id = f"call_{step}"
        messages.append(
            {
                "role": "assistant",
                "content": f"step {step}",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "bash",
                            "arguments": json.dumps({"command": f"cat file{step}.py"}),
                        },
                    }
                ],
            }
        )
        body = " ".join(f"s{step}w{i}" for i in range(words))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": body})
    messages.append({"role": "assistant", "content": "done"})
    return tj.Trajectory(
        "synthetic",
        TOOLS if tools is None else tools,
        messages,
        submission="",
        recorded_file_edits=0,
    )


def prompt(prepared: ar.Prepared, sent: list) -> int:
    return ar.measure(prepared, sent)[1]


def assert_whole_groups(sent: list, head_end: int) -> None:
    tail = sent[head_end:]
    if tail:
        assert tail[0]["role"] == "assistant", "the kept tail starts inside a group"
    open_ids: set[str] = set()
    for message in tail:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_ids, "a tool result lost its call"
        elif message.get("tool_calls"):
            open_ids = {call["id"] for call in message["tool_calls"]}


# ---------------------------------------------------------------- evidence


DIFF = """\
diff --git a/pkg/parser.py b/pkg/parser.py
index 1111111..2222222 100644
--- a/pkg/parser.py
+++ b/pkg/parser.py
@@ -10,6 +10,5 @@ def parse(text):
     tokens = split(text)
-    if tokens is None:
-        return []
+    if not tokens:
-x = 1
     for token in tokens:
@@ -40,3 +39,3 @@ class Parser:
--- SQL comment kept in a string --
+    pass
     if tokens is None:
-    if tokens is None:
diff --git a/docs/notes.txt b/docs/notes.txt
--- a/docs/notes.txt
+++ b/docs/notes.txt
@@ -1 +1 @@
-the old release notes line
+the new release notes line
"""


def test_evidence_is_removed_hunk_lines_stripped_long_and_unique() -> None:
    assert tj.evidence_lines(DIFF) == [
        "if tokens is None:",
        "return []",  # 9 characters stripped: kept; "x = 1" (5) is too short
        "-- SQL comment kept in a string --",  # a removed line that starts with "--"
        "the old release notes line",
    ]
    assert tj.patched_paths(DIFF) == ["pkg/parser.py", "docs/notes.txt"]


def test_evidence_is_shown_at_the_first_tool_output_and_kept_only_when_sent() -> None:
    run = agent_run(6)
    run.messages[5]["content"] += "\n   12\t    if tokens is None:"
    run.messages[9]["content"] += "\nif tokens is None:"
    run = tj.Trajectory(run.id, run.tools, run.messages, DIFF)
    prepared = ar.Prepared(run, COUNT)
    assert prepared.shown[0] == 5  # the first tool message that contains the line
    assert prepared.shown[1:] == [None, None, None]
    assert prepared.available(5) == 0 and prepared.available(6) == 1
    without = run.messages[:2] + run.messages[10:]
    assert ar.measure(prepared, run.messages[:6])[2] == 1
    assert ar.measure(prepared, without)[2] == 0
    # A message the method made up (a memory) is searched too.
    memory = {"role": "user", "content": "memory: if tokens is None: (line 12)"}
    assert ar.measure(prepared, [*without, memory])[2] == 1


@pytest.mark.parametrize(
    ("command", "writes"),
    [
        ("sed -i 's/a/b/' pkg/parser.py", True),
        ("cd /testbed && cat > fix.py << 'EOF'\nprint(1 > 0)\nEOF", True),
        ("cat <<'EOF' > pkg/parser.py\nx\nEOF", True),
        ("python - <<'EOF'\nopen('pkg/parser.py', 'w').write(s)\nEOF", True),
        ("git diff > patch.txt", True),
        ("echo x | tee -a notes.txt", True),
        ("cp pkg/parser.py pkg/parser.py.bak", True),
        ("git apply fix.diff", True),
        ("sed -n '1,20p' pkg/parser.py", False),
        ("python test.py 2>&1 | head -20", False),
        ('python -c "print(3 > 2)" > /dev/null', False),
        ("cat > /dev/null", False),
        ("python - <<'EOF'\nif a > b: print(open('x').read())\nEOF", False),
        ("grep -n 'a -> b' pkg/parser.py", False),
    ],
)
def test_edit_heuristic(command: str, writes: bool) -> None:
    assert tj.writes_file(command) is writes


def test_patched_file_mention_needs_the_whole_file_name() -> None:
    assert tj.mentions_path("sed -i 's/x/y/' pkg/parser.py", ["pkg/parser.py"])
    assert tj.mentions_path("cd pkg && sed -i 's/x/y/' parser.py", ["pkg/parser.py"])
    assert not tj.mentions_path("cat > test_parser.py << 'EOF'", ["pkg/parser.py"])
    assert not tj.mentions_path("vim parser.pyc", ["pkg/parser.py"])


# ---------------------------------------------------------------- baselines


def test_groups_keep_assistant_text_with_the_following_group() -> None:
    run = agent_run(4)
    head_end, groups = tj.head_and_groups(run.messages)
    assert head_end == 2
    # step 2 is preceded by assistant text, which opens its group
    assert groups[2] == (6, 9) and run.messages[6]["content"] == "thinking about step 2"
    assert groups[-1] == (11, 12)  # the final reply
    covered = [i for start, end in groups for i in range(start, end)]
    assert covered == list(range(2, len(run.messages)))


@pytest.mark.parametrize("window", [700, 1_000, 2_500])
def test_sliding_keeps_system_and_task_and_the_newest_groups_that_fit(window: int) -> None:
    prepared = ar.Prepared(agent_run(40), COUNT)
    reserve = 200
    sliding = ar.Sliding(prepared, window, reserve)
    trimmed = 0
    for k in prepared.requests:
        request = prepared.messages[:k]
        sent = list(sliding(request).messages)
        assert sent[:2] == request[:2] and sent[0] is request[0] and sent[1] is request[1]
        assert prompt(prepared, sent) <= window - reserve
        assert_whole_groups(sent, 2)
        tail = sent[2:]
        assert tail == request[len(request) - len(tail) :], "not the newest messages"
        if len(tail) < len(request) - 2:
            trimmed += 1
            # The next older group would not have fitted: the cut is as late as it can be.
            count = prepared.groups_before(k)
            first = prepared.group_starts.index(k - len(tail))
            assert 0 < first < count
            older = request[:2] + request[prepared.group_starts[first - 1] :]
            assert prompt(prepared, older) > window - reserve
    if window < 2_500:
        assert trimmed > 0


def test_sliding_sends_the_newest_group_even_when_it_alone_overflows() -> None:
    prepared = ar.Prepared(agent_run(5, words=300), COUNT)
    sent = ar.Sliding(prepared, 400, 100)(prepared.messages[: prepared.requests[-1]]).messages
    assert sent[-1] is prepared.messages[prepared.requests[-1] - 1]
    assert prompt(prepared, list(sent)) > 300


def test_chunked_keeps_its_cut_until_the_request_overflows() -> None:
    prepared = ar.Prepared(agent_run(60), COUNT)
    window, reserve = 1_500, 200
    budget = window - reserve
    chunked = ar.Chunked(prepared, window, reserve)
    previous: list | None = None
    cuts = last_k = 0
    for k in prepared.requests:
        request = prepared.messages[:k]
        sent = list(chunked(request).messages)
        assert sent[:2] == request[:2]
        assert_whole_groups(sent, 2)
        assert prompt(prepared, sent) <= budget
        if previous is not None:
            grown = previous + request[len(request) - (k - last_k) :]
            if prompt(prepared, grown) <= budget:
                assert sent == grown, "the cut moved although the request still fitted"
            else:
                cuts += 1
                assert prompt(prepared, sent) <= budget // 2
                assert sent[2] is not previous[2], "an overflow must move the cut"
        previous, last_k = sent, k
    assert cuts >= 3


def test_chunked_costs_less_than_sliding_under_prompt_caching() -> None:
    prepared = ar.Prepared(agent_run(80), COUNT)
    tallies = {m: ar.Tally(1_500, m) for m in ar.METHODS}
    for method in ("sliding", "chunked"):
        ar.replay(prepared, method, 1_500, 200, tallies[method])
    for provider in ar.PROVIDERS:
        assert tallies["chunked"].billed[provider] < tallies["sliding"].billed[provider]


# ---------------------------------------------------------------- pricing


def test_identical_consecutive_requests_reuse_the_cached_prefix() -> None:
    prepared = ar.Prepared(agent_run(40), COUNT)
    request = prepared.messages[: prepared.requests[-1]]
    chain, total, _ = ar.measure(prepared, request)
    assert total > 2_000
    assert chain[0] == (prepared.tools_key, prepared.tools_tokens)  # tool schemas come first
    openai, anthropic = _Pricer("openai"), _Pricer("anthropic")
    for pricer in (openai, anthropic):
        pricer.charge(chain, total)
    first_openai, first_anthropic = openai.billed, anthropic.billed
    assert first_openai == total and first_anthropic == 1.25 * total
    for pricer in (openai, anthropic):
        pricer.charge(*ar.measure(prepared, list(request))[:2])
    hit = chain[-1][1]
    cached = hit - (hit - 1024) % 128
    assert openai.billed - first_openai == pytest.approx(total - cached + 0.1 * cached)
    assert anthropic.billed - first_anthropic == pytest.approx(0.1 * hit + 1.25 * (total - hit))


def test_different_tools_break_the_cached_prefix() -> None:
    one = ar.Prepared(agent_run(40), COUNT)
    other_tools = [{"type": "function", "function": {"name": "python"}}]
    two = ar.Prepared(agent_run(40, tools=other_tools), COUNT)
    pricer = _Pricer("openai")
    chain, total, _ = ar.measure(one, one.messages[: one.requests[-1]])
    pricer.charge(chain, total)
    chain, total, _ = ar.measure(two, two.messages[: two.requests[-1]])
    before = pricer.billed
    pricer.charge(chain, total)
    assert pricer.billed - before == total


# ---------------------------------------------------------------- end to end


def write_runs(path: Path, runs: list[tj.Trajectory]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for run in runs:
            record = {
                "id": run.id,
                "tools": run.tools,
                "messages": run.messages,
                "meta": {"submission": run.submission, "file_edits": 1},
            }
            handle.write(json.dumps(record) + "\n")
    return path


def test_run_replays_every_method_through_the_public_session(tmp_path: Path) -> None:
    run = agent_run(60, words=60)
    run.messages[3]["content"] += "\n    if tokens is None:"
    calls = [m["tool_calls"][0]["function"] for m in run.messages if m.get("tool_calls")]
    edit = {"command": "sed -i 's/if tokens is None:/if not tokens:/' pkg/parser.py"}
    calls[-1]["arguments"] = json.dumps(edit)
    test_script = {"command": "cat > test_it.py << 'EOF'\nprint(1)\nEOF"}
    calls[-2]["arguments"] = json.dumps(test_script)
    run = tj.Trajectory(run.id, run.tools, run.messages, DIFF)
    data = write_runs(tmp_path / "runs.jsonl.gz", [run, agent_run(10)])
    report = ar.run(data, windows=(3_000,), reserve=500, progress=False)
    rows = {row["method"]: row for row in report.rows()}
    assert set(rows) == set(ar.METHODS)
    requests = len(ar.Prepared(run, COUNT).requests) + len(
        ar.Prepared(agent_run(10), COUNT).requests
    )
    assert all(row["requests"] == requests for row in rows.values())
    assert rows["full"]["over_window"] > 0
    assert rows["sliding"]["over_window"] == rows["chunked"]["over_window"] == 0
    full, sliding = rows["full"]["evidence"]["all"], rows["sliding"]["evidence"]["all"]
    assert full["kept"] == full["available"] > 0
    assert sliding["kept"] < sliding["available"] == full["available"]
    edits = rows["sliding"]["evidence"]["edit"]
    assert edits["requests"] == 2 and rows["sliding"]["evidence"]["patched_edit"]["requests"] == 1
    assert edits["available"] == 2  # the line was shown before both edit requests
    assert rows["sliding"]["openai_vs_sliding"] == 1.0
    assert sum(rows["tomc"]["actions"].values()) == requests
    assert rows["chunked"]["rebuilds"] > 0 == rows["sliding"]["rebuilds"]  # chunked cuts
    assert report.data["evidence_lines"] == 4 and report.data["evidence_shown"] == 1
    text = report.to_markdown()
    assert "### Window 3,000 (prompt budget 2,500)" in text
    assert text.count("| tomc |") == 1


def test_missing_data_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert ar.main(["--data", str(tmp_path / "absent.jsonl.gz")]) == 2
    assert "trajectory file not found" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": "no"}\n')
    assert ar.main(["--data", str(bad)]) == 2
    assert "line 1" in capsys.readouterr().err


def test_suite_section_skips_with_a_note_without_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import run as suite

    monkeypatch.setattr(tj, "DEFAULT_DATA", tmp_path / "agent_trajectories.jsonl.gz")
    (note,) = suite.agent_loop_section(quick=True)
    assert note.startswith("Skipped: agent_trajectories.jsonl.gz not found")
    write_runs(tj.DEFAULT_DATA, [agent_run(8)] * 13)
    lines = suite.agent_loop_section(quick=True)
    assert "### Window 24,000 (prompt budget 19,904)" in lines
    assert any(line.startswith("12 trajectories,") for line in lines)  # the quick set
    assert "#### `tomc` in each wire format, window 24,000" in lines
    assert not any(line.startswith(("| messages |", "| responses |")) for line in lines)
