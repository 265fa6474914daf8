"""Agent-injected text in user turns: what counts as the agent's context, what is the user's."""

from __future__ import annotations

import pytest

from tomc.chat._injected import is_injected, own_text, split_parts


@pytest.mark.parametrize(
    ("text", "injected"),
    [
        ("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>", True),
        ("<system-reminder>\ndate\n</system-reminder>\n<system-reminder>x</system-reminder>", True),
        ("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>", True),
        ("Another language model started to solve this problem and produced a summary", True),
        ("<pr_description>\nFix the bug in foo\n</pr_description>", False),  # a user's own task
        ("Fix the failing test", False),
        ("<system-reminder>x</system-reminder> and my own words", False),
        ("", False),
    ],
)
def test_agent_context_is_told_from_the_users_words(text, injected):
    assert is_injected(text) is injected


def test_reminders_inside_a_users_text_are_taken_out():
    assert own_text("<system-reminder>\nnote\n</system-reminder>\nFix it") == "Fix it"
    assert split_parts(["<system-reminder>a</system-reminder>", "Fix it"]) == ("Fix it", True)
    assert split_parts(["Fix it"]) == ("Fix it", False)
