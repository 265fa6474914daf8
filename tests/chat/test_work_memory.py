"""The memory of finished agent work: lines under their call, newest copy wins, within budget."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from chat_fixtures import entries_of
from chat_strategies import agent_loops
from tomc.chat._conversation import ASSISTANT, TOOL, Entry, ToolCall, ToolOutput
from tomc.chat._meter import meter_for
from tomc.chat._work_lines import MAX_HEADER_ARGS, collect
from tomc.chat._work_memory import _names_an_id, _ranked, build_work_memory, call_header

METER = meter_for("o200k_base")
HEADER = "[work memory]"
CALL = re.compile(r"^\[call (\d+) ")


def group(number: int, command: str, output: str) -> list[Entry]:
    call = ToolCall(f"c{number}", "bash", f'{{"command": "{command}"}}')
    return [
        Entry(ASSISTANT, "assistant", calls=(call,)),
        Entry(TOOL, "tool", outputs=(ToolOutput(call.id, output),)),
    ]


def build(entries, budget=10_000, task="fix the handler", focus=(), later=""):
    return build_work_memory(
        entries,
        task=task,
        focus=focus,
        later_text=later,
        budget=budget,
        count=METER.count,
        header=HEADER,
    )


def sections(text: str) -> dict[int, list[str]]:
    """Lines under each call header, by call number."""
    out: dict[int, list[str]] = {}
    current = None
    for line in text.splitlines()[1:]:
        match = CALL.match(line)
        if match:
            current = int(match[1])
            out[current] = []
        elif current is not None and not line.startswith("assistant: "):
            out[current].append(line)
    return out


def test_each_kept_line_sits_under_the_call_that_printed_it():
    entries = group(0, "cat app.py", "def handler():\n    return 1") + group(
        1, "grep -n handler tests.py", "12: handler()\n13: assert handler() == 1"
    )
    memory = build(entries)
    assert memory.text.startswith(HEADER + "\n")
    assert sections(memory.text) == {
        1: ["def handler():", "    return 1"],
        2: ["12: handler()", "13: assert handler() == 1"],
    }
    assert "[call 1 bash] cat app.py" in memory.text


def test_the_newest_copy_of_a_line_wins_and_later_text_is_not_repeated():
    entries = group(0, "cat app.py", "x = 1\ny = 2") + group(1, "cat app.py", "x = 1\nz = 3")
    memory = build(entries, later="z = 3")
    kept = sections(memory.text)
    assert kept[2] == ["x = 1"]  # the re-read holds the only copy; z = 3 is sent raw later
    assert "y = 2" in kept[1] and "x = 1" not in kept[1]


def test_long_arguments_are_cut_in_the_header():
    call = ToolCall("c0", "bash", '{"command": "' + "echo " + "x" * 500 + '"}')
    header = call_header(4, call)
    assert header.startswith("[call 4 bash] echo xxx") and header.endswith("…")
    assert len(header) <= len("[call 4 bash] ") + MAX_HEADER_ARGS


@given(agent_loops(), st.integers(0, 3000), st.booleans())
def test_never_over_budget_and_lines_are_verbatim(history, budget, with_focus):
    entries = [e for e in entries_of(history) if e.kind in (ASSISTANT, TOOL)]
    focus = entries[-2:] if with_focus else ()
    memory = build(entries, budget=budget, focus=focus)
    header_cost = METER.count(HEADER + "\n")
    if budget >= header_cost:
        assert METER.count(memory.text) <= max(budget, header_cost)
    outputs = {line for e in entries for o in e.outputs for line in o.text.splitlines()}
    notes = {line for e in entries for line in e.text.splitlines()}
    in_values = False
    for line in memory.text.splitlines()[1:]:
        in_values = line.startswith("[values these calls read") or (
            in_values and not (CALL.match(line) or line.startswith("[calls "))
        )
        assert (
            CALL.match(line)
            or line.startswith(("[calls ", "[replaced later: "))
            or in_values
            or line in outputs
            or line.removeprefix("assistant: ") in notes
        ), line


def test_recent_work_is_preferred_when_the_budget_is_tight():
    entries = []
    for number in range(30):
        entries += group(number, f"cat module{number}.py", f"line {number} of module{number}")
    memory = build(entries, budget=120)
    kept = sections(memory.text)
    assert max(kept) == 30 and 1 not in kept


def first_line_kept(entries) -> list[str]:
    """The output line(s) kept at the smallest budget that keeps any."""
    for budget in range(20, 400):
        kept = sections(build(entries, budget=budget, task="").text)
        lines = [line for section in kept.values() for line in section]
        if lines:
            return lines
    return []


def test_a_line_the_work_showed_again_and_again_outranks_one_it_showed_once():
    repeated, once = "    except FileNotFoundError:", "    except NotADirectoryError:"
    assert METER.count(repeated) == METER.count(once)  # neither fits sooner than the other
    entries = []
    for number in range(3):  # three different views of the file show the line
        command = f"sed -n {90 + number},140p loader.py"
        entries += group(number, command, f"{repeated}\n# {number}: " + "padding " * 20)
    # The newest call shows both lines; without the repeat weight the later line wins the tie.
    entries += group(3, "sed -n 100,140p loader.py", f"{repeated}\n{once}")
    assert first_line_kept(entries) == [repeated]
    assert sorted(sections(build(entries, task="").text)[4]) == sorted([repeated, once])


def test_the_same_command_run_again_does_not_make_its_lines_repeats():
    repeated, once = "    except FileNotFoundError:", "    except NotADirectoryError:"
    entries = []
    for number in range(3):  # one command re-run (a test suite): its output is no repeat
        entries += group(number, "pytest -q", f"{repeated}\n# {number}: " + "padding " * 20)
    entries += group(3, "pytest -q", f"{repeated}\n{once}")
    assert first_line_kept(entries) == [once]


def test_exact_records_come_first_when_the_task_asks_for_them():
    from tomc.chat._layout import WORK
    from tomc.chat._memory import build_region_memory

    entries = group(0, "cat deploy.cfg", "deploy_target = staging\nregion = eu") + group(
        1, "grep target app.log", "rollback_target copies deploy_target\nstarted ok"
    )
    entries += group(2, "cat deploy.cfg", "deploy_target = production")

    def build(task: str) -> str:
        return build_region_memory(
            entries,
            kind=WORK,
            task=task,
            focus=(),
            later=(),
            budget=400,
            meter=METER,
            strategy="tomc_raw",
        ).text

    asked = build("What is the current value of rollback_target?").splitlines()
    assert asked[1].startswith("STATE rollback_target = staging (")  # right after the header
    plain = build("Why did the deploy start?").splitlines()
    assert not any(line.startswith("STATE ") for line in plain)


def test_exec_framing_is_not_kept_as_evidence_but_a_failing_exit_is():
    output = (
        "Chunk ID: 4f1c\nWall time: 0.0123 seconds\nProcess exited with code 0\n"
        "Original token count: 12\nOutput:\nsecret_token = tok-7f3a9c51e2\n"
    )
    failing = "Script completed\nWall time 0.1 seconds\nOutput:\nProcess exited with code 2\n"
    entries = [
        Entry(ASSISTANT, "assistant", calls=(ToolCall("c1", "exec", '{"cmd": "cat a.log"}'),)),
        Entry(TOOL, "tool", outputs=(ToolOutput("c1", output),)),
        Entry(ASSISTANT, "assistant", calls=(ToolCall("c2", "exec", '{"cmd": "make"}'),)),
        Entry(TOOL, "tool", outputs=(ToolOutput("c2", failing),)),
    ]
    memory = build_work_memory(
        entries,
        task="secret_token",
        focus=(),
        later_text="",
        budget=500,
        count=lambda text: len(text.split()),
        header="[memory]",
    )
    assert "secret_token = tok-7f3a9c51e2" in memory.text
    assert "Process exited with code 2" in memory.text
    for framing in (
        "Chunk ID",
        "Wall time",
        "Original token count",
        "Output:",
        "code 0",
        "Script completed",
    ):
        assert framing not in memory.text
    assert memory.candidate_lines == 2


def test_the_files_the_work_changed_stay_named_at_any_budget():
    entries = []
    for number in range(30):
        command = f"cat module{number}.py"
        if number % 10 == 3:
            command += f" && sed -i 's/a/b/' src/edited_{number}.py"
        entries += group(number, command, f"line {number} of module{number}\n" * 20)
    for budget in (80, 10_000):
        lines = build(entries, budget=budget).text.splitlines()
        assert lines[1] == (
            "[files changed by these calls: src/edited_3.py, src/edited_13.py, src/edited_23.py]"
        )
    unchanged = build(group(0, "cat module0.py", "x = 1")).text
    assert "files changed" not in unchanged


def test_a_deep_memory_still_keeps_its_exact_records():
    from tomc.chat._layout import WORK
    from tomc.chat._memory import build_region_memory

    names = [f"probe_value_{k:02d}" for k in range(20)]
    entries = []
    for number, name in enumerate(names):
        entries += group(number, f"cat step{number}.log", f"{name} = v{number}x\n" + "noise\n" * 40)
    text = build_region_memory(
        entries,
        kind=WORK,
        task="Report the values of " + ", ".join(names),
        focus=(),
        later=(),
        budget=1_000,
        meter=METER,
        strategy="tomc_raw",
    ).text
    assert all(f"STATE {name} = v{k}x" in text for k, name in enumerate(names))


# -- what a realistic session needs: the log of calls, values in any format, the task's lines


def _code(number: int, lines: int = 120) -> str:
    """Ordinary source code, different in every call."""
    return "\n".join(
        f"    result_{number}_{i} = compute(item_{i}, limit=step_{i})  # pass {i}"
        for i in range(lines)
    )


def test_every_call_keeps_its_header_in_order_and_runs_are_folded():
    entries = []
    for number in range(40):
        entries += group(number, f"cat src/module_{number:02d}.py", _code(number))
    memory = build(entries, budget=1_500, task="what does module 39 compute")
    text = memory.text
    for number in range(40):
        assert f"src/module_{number:02d}.py" in text, number
    positions = [text.index(f"src/module_{number:02d}.py") for number in range(40)]
    assert positions == sorted(positions)
    assert "[calls 1-" in text  # the old calls kept no line: one line names them all
    assert METER.count(text) <= 1_500


def test_a_log_too_long_for_the_budget_is_one_summary_line():
    entries = []
    for number in range(60):
        entries += group(number, f"cat src/module_{number:02d}.py", _code(number, 5))
    # one tool: the calls fold into one bare line when their arguments do not fit
    memory = build(entries, budget=150, task="")
    assert memory.text.splitlines()[1] == "[calls 1-59 bash, no output lines kept]"
    assert METER.count(memory.text) <= 150
    # tools taking turns: sixty bare lines do not fit, one summary line says what ran
    for number in range(0, 120, 4):
        entries[number] = Entry(
            ASSISTANT,
            "assistant",
            calls=(ToolCall(f"c{number // 2}", "python", '{"command": "x"}'),),
        )
    memory = build(entries, budget=150, task="")
    assert "[calls 1-60: python 30, bash 30; no output kept]" in memory.text
    assert METER.count(memory.text) <= 150


def test_values_in_any_format_head_the_memory_newest_wins_and_stale_lines_say_so():
    planted = {
        3: '{"service": "ingest-worker", "limits": {"max_batch": 72613}}',
        7: "storage:\n  buckets:\n    primary: acme-prod-5512",
        11: "X-Tenant-Id: tenant-0451",
        15: "level=warn service=edge upstream_token_ttl=3600s msg=slow",
        30: '{"service": "ingest-worker", "limits": {"max_batch": 80111}}',
    }
    entries = []
    for number in range(40):
        output = _code(number)
        if number in planted:
            lines = output.splitlines()
            output = "\n".join([*lines[:50], planted[number], *lines[50:]])
        entries += group(number, f"cat src/module_{number:02d}.py", output)
    task = (
        "Report the ingest worker's max batch, the primary bucket, the tenant header and the "
        "upstream token TTL."
    )
    memory = build(entries, budget=3_000, task=task)
    head = memory.text.split("\n[call", 1)[0]
    assert "ingest-worker limits.max_batch = 80111 (call 31)" in head
    assert "72613" not in head  # the replaced value is never listed as current
    assert "storage.buckets.primary = acme-prod-5512 (call 8)" in head
    assert "X-Tenant-Id = tenant-0451 (call 12)" in head
    assert "edge upstream_token_ttl = 3600s (call 16)" in head
    # the values the task names come before any other
    rows = head.splitlines()[
        head.splitlines().index(
            next(line for line in head.splitlines() if line.startswith("[values these calls read"))
        )
        + 1 :
    ]
    assert {row.split(" = ")[0] for row in rows[:4]} == {
        "ingest-worker limits.max_batch",
        "storage.buckets.primary",
        "X-Tenant-Id",
        "edge upstream_token_ttl",
    }
    if planted[3] in memory.text:
        after = memory.text.split(planted[3] + "\n", 1)[1]
        assert after.startswith(
            "[replaced later: ingest-worker limits.max_batch = 80111 (call 31)]"
        )


def test_a_value_sent_after_the_memory_is_not_listed_from_before():
    entries = group(0, "cat config.yaml", "retry:\n  limit: 3") + group(1, "ls", "a\nb")
    memory = build(entries, task="the retry limit", later="retry:\n  limit: 9")
    assert "retry.limit = 3" not in memory.text
    assert "[replaced later: retry.limit = 9 (later in this conversation)]" in memory.text


def test_a_strong_task_match_in_an_old_call_outranks_filler_of_a_new_one():
    note = "The primary bucket moved to acme-prod-5512 after the storage review."
    entries = group(0, "cat docs/runbook.md", note)
    for number in range(1, 30):
        entries += group(number, f"cat src/module_{number:02d}.py", _code(number, 40))
    memory = build(entries, budget=4_500, task="Which bucket is the primary bucket now?")
    assert note in memory.text
    assert memory.kept_lines < 300  # the budget kept a fraction of the newer filler


def test_salient_lines_rank_above_ordinary_lines_of_their_call():
    lines = _code(0, 60).splitlines()
    error = "ERROR licence check failed: key LIC-88412-QX rejected by https://licences.example.test"
    sentence = "Note that the fallback region was retired after the March incident review."
    output = "\n".join([*lines[:20], error, *lines[20:40], sentence, *lines[40:]])
    memory = build(group(0, "cat worker.log", output), budget=120, task="")
    assert error in memory.text and sentence in memory.text
    assert memory.kept_lines < 20  # the ordinary lines after them were the newer ones


def test_an_appended_block_brings_back_what_the_task_asks_that_earlier_blocks_left_out():
    from tomc.chat._work_memory import BROUGHT_BACK

    note = "Failover drills run against the standby region, currently ap-south-3z, monthly."
    earlier = group(0, "cat docs/runbook.md", _code(0, 30) + "\n" + note + "\n" + _code(1, 30))
    earlier += group(1, "cat config/app.yaml", "storage:\n  primary_bucket: acme-raw-7")
    earlier += group(2, "cat config/db.ini", "[replica]\nhost = pg-replica-9")
    shown_before = "[TOMC memory ...]\nreplica.host = pg-replica-9 (call 3)\n"
    entries = []
    for number in range(3, 8):
        entries += group(number, f"cat src/module_{number:02d}.py", _code(number, 40))
    task = "Report the standby region of the failover drills, the primary bucket, the replica host"

    def after(blocks_before: str) -> str:
        return build_work_memory(
            entries,
            task=task,
            focus=(),
            later_text="",
            budget=2_000,
            count=METER.count,
            header=HEADER,
            first_call_number=4,
            earlier=(tuple(earlier), blocks_before, 1),
        ).text

    memory = after(shown_before)
    brought = memory.split(BROUGHT_BACK + "\n", 1)[1]
    assert brought.startswith("[call 1 bash] docs/runbook.md\n" + note + "\n")
    assert "storage.primary_bucket = acme-raw-7 (call 2)" in memory  # a value not shown before
    assert "replica.host" not in memory  # stated by the block before: not again
    assert METER.count(memory) <= 2_000
    # nothing comes back when the blocks before show it already
    again = after(shown_before + note)
    assert note not in again


def test_a_constant_of_code_is_the_file_s_own():
    first = group(0, "cat src/a.py", "import os\n\ndef f():\n    return 1\n\nTIMEOUT = 30\n")
    second = group(1, "cat src/b.py", "import os\n\ndef g():\n    return 2\n\nTIMEOUT = 45\n")
    memory = build(first + second, task="the timeout of each module").text
    assert "src/a.py TIMEOUT = 30 (call 1)" in memory
    assert "src/b.py TIMEOUT = 45 (call 2)" in memory
    assert "[replaced later" not in memory


TWENTY_ASKS = "\n".join(
    [
        "Tell me the current value of each of these:",
        "1. the standby region used for disaster-recovery exercises;",
        "2. the ticket tracking the disk space clean-up;",
        "3. the node holding partition 12's lease;",
        "4. the prefix the worker's metrics are sent under;",
        "5. the licence key in the licensing error;",
    ]
)
ANSWERS = {
    "docs/maintenance.md": "Failover drills run against the standby region, currently ap-south-3z.",
    "logs/worker.log": "WARN ingest.scratch: scratch volume at 91%; cleanup tracked in OPS-59374",
    "logs/coordinator.log": 'ts=01:49 level=info msg="lease acquired" partition=12 '
    "lease_owner=node-d21c4",
    "config/worker.env": "STATSD_PREFIX=acme.ingest.green",
    "logs/licensing.log": "ERROR licensing.client: licence key LK-93QF rejected by vendor",
}


def _answers_among_code() -> list[Entry]:
    entries: list[Entry] = []
    number = 0
    for path, answer in ANSWERS.items():
        for _ in range(5):  # filler calls around each answer, newer ones last
            entries += group(number, f"cat src/module_{number:02d}.py", _code(number, 60))
            number += 1
        code = _code(number, 60).splitlines()
        entries += group(number, f"cat {path}", "\n".join([*code[:30], answer, *code[30:]]))
        number += 1
    for _ in range(6):
        entries += group(number, f"cat src/module_{number:02d}.py", _code(number, 60))
        number += 1
    return entries


def test_every_request_of_the_task_keeps_its_best_answer_in_a_small_memory():
    """Twenty-odd calls of code hide one answer each (a sentence, a log line, a logfmt pair, an
    .env line, an error): in a memory of 1,500 tokens, far less than the filler, each of the
    task's requests keeps the value or the line that answers it best."""
    memory = build(_answers_among_code(), budget=1_500, task=TWENTY_ASKS)
    assert memory.tokens <= 1_500
    for value in ("ap-south-3z", "OPS-59374", "node-d21c4", "acme.ingest.green", "LK-93QF"):
        assert value in memory.text, value
    # The lease is a logfmt value: it heads the memory, among the values the task names.
    head = memory.text.split("[call ")[0]
    assert "lease_owner = node-d21c4" in head and "STATSD_PREFIX = acme.ingest.green" in head


def test_a_small_memory_names_a_call_without_its_tools_shared_wrapper():
    def wrapped(number: int, command: str, output: str) -> list[Entry]:
        code = (
            f'const r = await tools.exec_command({{cmd: "{command}", '
            "max_output_tokens: 20000, yield_time_ms: 10000}); text(r.output);"
        )
        call = ToolCall(f"c{number}", "exec", code)
        return [
            Entry(ASSISTANT, "assistant", calls=(call,)),
            Entry(TOOL, "tool", outputs=(ToolOutput(call.id, output),)),
        ]

    entries = []
    for number in range(12):
        entries += wrapped(number, f"cat src/module_{number:02d}.py", _code(number, 40))
    small = build(entries, budget=1_200).text
    large = build(entries, budget=20_000).text
    # A header shows at most HEADER_ARGS characters: past them, the file the call touched.
    assert all(f"src/module_{n:02d}.py" in large for n in range(12))
    kept = [line for line in small.splitlines() if CALL.match(line)]
    assert kept and not any("const r = await" in line for line in kept)
    assert any("src/module_11.py" in line for line in kept)


def _passes(entries: list[Entry], task: str, valued: frozenset[int] = frozenset()):
    """The lines that lead for the task's requests and those of the task's pass (``_ranked``)."""
    work, _ = collect(entries, 1)
    candidates = list(range(len(work.texts)))
    costs = {i: METER.count(work.texts[i] + "\n") for i in candidates}
    bonus = [0.0] * len(work.texts)
    leaders, on_task, _ = _ranked(work, candidates, costs, bonus, task, "", set(), None, valued)
    return [work.texts[i] for i in leaders], [work.texts[i] for i in on_task]


ASK = "Which region do the disaster-recovery exercises run against?"
NAMED = "Exercises use the standby region ap-south-3z."
PLAIN = "Exercises use the standby region this quarter."
PROSE = [f"Section {i} describes how the pipeline handles its step number {i}." for i in range(9)]


def _runbook(line: str, note: str = "") -> list[Entry]:
    entries = group(0, "cat docs/runbook.md", "\n".join([*PROSE[:4], line, *PROSE[4:]]))
    return entries + ([Entry(ASSISTANT, f"assistant: {note}")] if note else [])


def test_the_agent_s_own_restatement_does_not_take_a_request_s_line():
    """The agent's note repeats the request's words (a better match than any line of output);
    the request's line is still the tool's line that answers it."""
    note = "I need the region the disaster-recovery exercises run against."
    leaders, on_task = _passes(_runbook(NAMED, note), ASK)
    assert leaders == [NAMED] and f"assistant: {note}" not in on_task


def test_the_task_s_pass_takes_lines_that_can_answer():
    """Beyond each request's best line, a strong match goes first only when it can answer:
    it holds a value, names an id or stands out; code that shares the task's words does not."""
    assert _passes(_runbook(NAMED), ASK) == ([NAMED], [NAMED])
    assert _passes(_runbook(PLAIN), ASK) == ([PLAIN], [])
    assert _passes(_runbook(PLAIN), ASK, valued=frozenset({4})) == ([PLAIN], [PLAIN])


def test_an_id_is_a_token_of_letters_and_digits_in_any_line():
    assert _names_an_id("Exercises use the standby region ap-south-3z.")
    assert _names_an_id("image: worker:2026.11.0-rc3")
    assert not _names_an_id("Exercises use the standby region this quarter.")
    assert not _names_an_id("max_batch = 72613")
    # Long runs of one token, which a lookahead from each word boundary rescans: linear here.
    assert not _names_an_id("a." * 200_000) and not _names_an_id("1." * 200_000)
    assert _names_an_id("a." * 200_000 + "a1")


def test_a_line_a_later_one_replaced_does_not_take_the_task_s_room():
    """A line whose value a later line replaced is out of the task's pass, so its stale value
    does not crowd out newer work in a small memory."""
    entries = group(0, "cat config/retry.env", "retry_limit = 3\nretry_backoff = 2")
    for number in range(1, 31):
        entries += group(number, f"cat src/module_{number:02d}.py", _code(number, 40))
    memory = build(entries, budget=1_200, task="the retry limit", later="retry_limit = 6")
    assert "retry_limit = 3" not in memory.text
    assert "[replaced later: retry_limit = 6" not in memory.text
