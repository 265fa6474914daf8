"""Which names a task mentions: words, phrases, and names inside CJK text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

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


def test_labels_in_plain_words_any_case_and_inflection() -> None:
    assert TaskMentions("Who reports to whom?").label("reports_to")
    assert TaskMentions("who REPORTED-TO the lead").label("reports_to")
    assert TaskMentions("What does erin own?").label("owns")
    assert TaskMentions("files owned by erin").label("owns")
    assert not TaskMentions("the reporting chain").label("reports_to")  # "to" is missing
    assert not TaskMentions("who manages what").label("managed_by")
    assert not TaskMentions("what is it").label("Is")  # a stopword label, as written only


#: Label words and their regular forms (what a person writes in a question).
_FORMS = {
    "report": ("report", "reports", "reported", "reporting"),
    "approve": ("approve", "approves", "approved", "approving"),
    "assign": ("assign", "assigns", "assigned", "assigning"),
    "deploy": ("deploy", "deploys", "deployed", "deploying"),
    "block": ("block", "blocks", "blocked", "blocking"),
    "review": ("review", "reviews", "reviewed", "reviewing"),
}


@given(data=st.data(), joiner=st.sampled_from(["_", "-"]), upper=st.booleans())
def test_a_label_is_named_by_its_words_in_a_sentence(data, joiner, upper) -> None:
    words = data.draw(st.lists(st.sampled_from(sorted(_FORMS)), min_size=1, max_size=3))
    label = joiner.join(data.draw(st.sampled_from(_FORMS[word])) for word in words)
    written = " ".join(data.draw(st.sampled_from(_FORMS[word])) for word in words)
    written = written.upper() if upper else written
    assert TaskMentions(f"Tell me: who {written} what?").label(label)
