"""Routing: a table of tasks in English, Simplified and Traditional Chinese."""

from __future__ import annotations

import pytest

from tomc._core.task_routes import route_task

VARIABLES = {"deploy_target", "温度", "replicas", "count"}
LABELS = {"owns", "assigned", "reports_to"}

TABLE = [
    # English
    ("How many times does 'deploy' appear?", "count"),
    ("How often did the build fail?", "count"),
    ("Count the occurrences of timeout", "count"),
    ("What are the 5 most common words?", "count"),
    ("How many errors were logged?", "count"),
    ("How many errors are there currently?", "count"),
    ("How many times was replicas changed?", "count"),
    ("What is the current value of deploy_target?", "state"),
    ("What is deploy_target now?", "state"),
    ("How many replicas are configured now?", "state"),  # names a variable: its value
    ("What is count?", "state"),  # a variable called count
    ("What is the final value?", "state"),
    ("Who is related to alice?", "relation"),
    ("relation: assigned > owns", "relation"),
    ("Which team owns the archive?", "relation"),  # names a relation label
    ("Who reports to whom?", "relation"),  # a label in plain words
    ("What does erin own?", "relation"),  # ... and inflected
    ("Which systems are owned by the data team?", "relation"),
    ("List every Reports_To edge", "relation"),
    ("Quote exactly what bob said about the canary", "raw"),
    ("What did alice say about lunch?", "raw"),
    ("Where is the canary deployed?", "raw"),
    # Simplified Chinese
    ("部署出现了几次？", "count"),
    ("deploy 出现了多少次？", "count"),
    ("统计错误的次数", "count"),
    ("最常见的词是什么？", "count"),
    ("有多少个错误？", "count"),
    ("错误一共有多少？", "count"),
    ("deploy_target 的当前值是多少？", "state"),
    ("deploy_target的当前值是什么？", "state"),
    ("温度现在是多少？", "state"),
    ("温度的当前值是什么？", "state"),
    ("目前的值是多少？", "state"),
    ("问题出现在哪里？", "raw"),
    ("alice 和 team 之间的关系是什么？", "relation"),
    ("他的原话是怎么说的？", "raw"),
    # Traditional Chinese
    ("部署出現了幾次？", "count"),
    ("統計錯誤的次數", "count"),
    ("有多少個錯誤？", "count"),
    ("出現頻率最高的詞是哪個？", "count"),
    ("最常見的詞是什麼？", "count"),
    ("deploy_target 的當前值是多少？", "state"),
    ("目前的值是什麼？", "state"),
    ("問題出現在哪裡？", "raw"),
    ("alice 和 team 之間的關係是什麼？", "relation"),
    ("他的原話是怎麼說的？", "raw"),
]


@pytest.mark.parametrize(("task", "route"), TABLE)
def test_route_table(task: str, route: str) -> None:
    decision = route_task(task, VARIABLES, LABELS)
    assert decision.route == route, decision.reason
    assert decision.reason


def test_a_named_variable_outranks_a_plain_how_many_and_says_so() -> None:
    decision = route_task("温度现在是多少？", VARIABLES, LABELS)
    assert decision.reason == "task names variable '温度' (over the count cue '多少')"


def test_traditional_chinese_count_cue_is_named() -> None:
    assert route_task("部署出現了幾次？", VARIABLES, LABELS).reason == "Chinese cue '幾次'"


def test_wording_cues_mark_the_route_wording_sensitive() -> None:
    assert route_task("他的原話是怎麼說的？", VARIABLES, LABELS).wording_sensitive
    assert not route_task("温度现在是多少？", VARIABLES, LABELS).wording_sensitive


@pytest.mark.parametrize(
    ("task", "route"),
    [
        ("What's the count of errors?", "count"),
        ("Fix it, then count the retries in the log", "count"),
        ("Count 'deploy failed' in the log", "count"),
        # "count" ending a setting's name asks for its value, not for counting (a numbered
        # list of asks went the count route and filled a fifth of the memory with COUNT rows).
        ("Report the ledger sync's replica count and the payments api's region", "raw"),
        ("Then report:\n1. the ledger sync's replica count\n2. the region", "raw"),
    ],
)
def test_count_as_a_verb_or_the_count_of_is_counting_a_name_ending_in_count_is_not(task, route):
    assert route_task(task, set(), set()).route == route
