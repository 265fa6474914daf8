"""Which files a stretch of agent work changed, from the documented shapes of its tool calls."""

from __future__ import annotations

import json

from tomc.chat._changed_files import changed_files
from tomc.chat._conversation import ToolCall


def call(name: str, arguments: object) -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall("c", name, text)


def test_editing_tools_name_their_file():
    calls = [
        call("Edit", {"file_path": "/repo/app.py", "old_string": "a", "new_string": "b"}),
        call("Write", {"file_path": "notes/plan.md", "content": "x"}),
        call("MultiEdit", {"file_path": "/repo/app.py", "edits": []}),
        call("NotebookEdit", {"notebook_path": "nb/a.ipynb", "new_source": ""}),
        call("str_replace_based_edit_tool", {"command": "str_replace", "path": "src/x.rs"}),
        call("str_replace_based_edit_tool", {"command": "view", "path": "src/read_only.rs"}),
        call("Read", {"file_path": "/repo/only_read.py"}),
    ]
    assert changed_files(calls) == ["/repo/app.py", "notes/plan.md", "nb/a.ipynb", "src/x.rs"]


def test_shell_commands_and_patches_that_write():
    patch = "*** Begin Patch\n*** Update File: pkg/mod.py\n@@\n-a\n+b\n*** Add File: pkg/new.py\n"
    calls = [
        call("Bash", {"command": "cat data/step_01.log && sed -i 's/x/y/' src/module_0.py"}),
        call("shell", {"command": ["bash", "-lc", "echo hi > out/report.txt; ls src"]}),
        call("exec", 'await tools.exec_command({cmd: "printf a | tee -a logs/run.log"})'),
        call("apply_patch", patch),
        call("Bash", {"command": "grep -n foo src/*.py 2>/dev/null > /dev/null"}),
        call("Bash", {"command": "cat a.py; python -c 'print(1 > 0)'"}),
    ]
    assert changed_files(calls) == [
        "src/module_0.py",
        "out/report.txt",
        "logs/run.log",
        "pkg/mod.py",
        "pkg/new.py",
    ]


def test_reading_is_not_changing():
    calls = [
        call("Bash", {"command": "cat src/app.py | head -40"}),
        call("Grep", {"pattern": "def main", "path": "src"}),
        call("exec", 'await tools.exec_command({cmd: "sed -n 1,40p src/app.py"})'),
    ]
    assert changed_files(calls) == []
