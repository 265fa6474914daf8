"""Which names a task mentions: words, phrases, and names inside CJK text."""

from __future__ import annotations

from tomc._core.mentions import TaskMentions


def test_identifiers_end_where_cjk_text_begins() -> None:
    mentions = TaskMentions("deploy_target的当前值是什么？还有 region 呢")
    assert {"deploy_target", "region"} <= mentions.words
    assert mentions.variables(["deploy_target", "region", "target"]) == ["deploy_target", "region"]


def test_stopword_names_need_exact_case() -> None:
    assert TaskMentions("What is A?").variables(["A", "a", "it"]) == ["A"]
    assert TaskMentions("what is it").variables(["A", "It"]) == []


def test_cjk_names_inside_text_longest_first() -> None:
    mentions = TaskMentions("室内温度和湿度现在是多少")
    assert mentions.variables(["温度", "室内温度", "湿度", "度"]) == ["室内温度", "湿度"]
    assert TaskMentions("温度和室内温度").variables(["温度", "室内温度"]) == ["温度", "室内温度"]


def test_entities_by_word_phrase_or_cjk() -> None:
    mentions = TaskMentions("Who owns the deploy pipeline? 还有 数据组")
    nodes = ["deploy_pipeline", "platform-team", "数据组", "pipeline", "deploy"]
    assert mentions.entities(nodes) == {"deploy_pipeline", "数据组", "pipeline", "deploy"}
    assert mentions.label("owns") and not mentions.label("assigned")
