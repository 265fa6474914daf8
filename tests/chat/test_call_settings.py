"""What a call's own arguments set, read as the lines they write."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc.chat._call_settings import MAX_SETTING_LINES, setting_lines, written_where
from tomc.chat._conversation import ASSISTANT, TOOL, USER, Entry, ToolCall, ToolOutput
from tomc.chat._meter import meter_for
from tomc.chat._work_memory import build_work_memory


def _lines(arguments: object, tool: str = "bash") -> list[str]:
    return setting_lines(ToolCall("c", tool, json.dumps(arguments)))


@pytest.mark.parametrize(
    ("arguments", "written"),
    [
        (
            {"command": "sed -i 's/^work_mem = .*/work_mem = 96MB/' conf/postgresql.conf"},
            ["work_mem = 96MB"],
        ),
        ({"command": "sed -i 's|^root = .*|root = /srv/a|' nginx.conf"}, ["root = /srv/a"]),
        ({"command": "echo 'SIGNING_KEY_ID=sk_4f1' >> .env"}, ["SIGNING_KEY_ID=sk_4f1"]),
        (
            {"command": "export OTEL_BSP_MAX_QUEUE_SIZE=4096 && make run"},
            ["OTEL_BSP_MAX_QUEUE_SIZE=4096"],
        ),
        ({"command": "kubectl set env deployment/api API_LIMIT=40"}, ["API_LIMIT=40"]),
        ({"command": "helm upgrade api ./chart --set a.b=1,c=2"}, ["a.b=1", "c=2"]),
        ({"command": ["bash", "-lc", "PORT=8081 ./serve"]}, ["PORT=8081"]),
        ({"command": "cat > a.ini <<'EOF'\n[db]\nhost = h1\nEOF"}, ["[db]", "host = h1"]),
        ({"file_path": "a.yaml", "old_string": "  x: 1", "new_string": "  x: 2"}, ["  x: 2"]),
        (
            {"input": "*** Begin Patch\n*** Update File: config/app.toml\n@@\n-x = 1\n+x = 2"},
            ["x = 2"],
        ),
        ({"command": "echo 'LIMIT=4' > deploy/prod.env"}, ["LIMIT=4"]),
        # Code is not settings: an edit of it replaces lines the memory must show as they were.
        ({"file_path": "src/a.py", "old_string": "X = 1", "new_string": "X = 2"}, []),
        ({"input": "*** Begin Patch\n*** Update File: src/a.py\n@@\n-X = 1\n+X = 2"}, []),
        ({"command": "sed -i 's/^X = 1/X = 2/' src/a.py"}, []),
        ({"command": "cat > repro.py <<'EOF'\nX = 2\nEOF"}, []),
        ({"command": "echo 'X = 2' >> notes.md"}, []),
        ({"command": "ls -la && grep -n 'a=b' src/app.py | head"}, []),
        ({"command": "echo 'a=b'"}, []),  # printed, not written
    ],
)
def test_a_call_s_arguments_give_the_lines_they_write(arguments, written):
    assert _lines(arguments) == written


@given(
    st.recursive(
        st.text() | st.none() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_no_arguments_fail_the_reader(arguments):
    for key in ("command", "new_string", "input", "x"):
        lines = _lines({key: arguments})
        assert len(lines) <= MAX_SETTING_LINES and all(isinstance(line, str) for line in lines)
    assert setting_lines(ToolCall("c", "custom", "not json at all")) == []


def test_a_value_a_command_sets_replaces_the_one_printed_before():
    meter = meter_for("o200k_base")
    read = ToolCall("c0", "bash", json.dumps({"command": "cat conf/billing.conf"}))
    sets = ToolCall(
        "c1",
        "bash",
        json.dumps(
            {
                "command": "sed -i 's/^queue_limit = .*/queue_limit = 5120/' "
                "conf/billing.conf && systemctl restart billing"
            }
        ),
    )
    filler = "\n".join(f"line {n} of an unrelated log" for n in range(400))
    entries = [
        Entry(USER, "user", "Raise the billing queue limit, then report the billing queue limit."),
        Entry(ASSISTANT, "assistant", calls=(read,)),
        Entry(TOOL, "tool", outputs=(ToolOutput("c0", f"queue_limit = 2048\n{filler}"),)),
        Entry(ASSISTANT, "assistant", calls=(sets,)),
        Entry(TOOL, "tool", outputs=(ToolOutput("c1", ""),)),
    ]
    memory = build_work_memory(
        entries[1:],
        task=entries[0].text,
        focus=(),
        later_text="",
        budget=600,
        count=meter.count,
        header="[work memory]",
    )
    assert "queue_limit = 5120 (call 2)" in memory.text


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        (
            {"command": "sed -i 's/^a = .*/a = 1/' conf/billing-worker.conf"},
            "conf/billing-worker.conf",
        ),
        ({"command": "echo 'A=1' >> .env"}, ".env"),
        ({"file_path": "config/x.yaml", "new_string": "a: 1"}, "config/x.yaml"),
        ({"command": "kubectl set env deployment/cart-service A=1"}, "deployment/cart-service"),
        ({"command": "cd ops && helm upgrade cart ./chart --set a=1"}, "cart"),
        # A bare export names nothing it belongs to (its key says whose it is); the script it
        # runs after is not where the value lives.
        ({"command": "export A=1 && ./scripts/restart x"}, ""),
    ],
)
def test_a_written_value_belongs_to_what_the_call_writes(arguments, where):
    assert written_where(ToolCall("c", "bash", json.dumps(arguments))) == where
