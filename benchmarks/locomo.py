"""LoCoMo evidence-turn recall: does the memory keep the turns that answer the question?

The data set is read from ``../shared/data/locomo10.json`` (or ``$TOMC_BENCH_DATA/locomo10.json``)
at run time and never copied.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from benchmarks.progress import data_file

DEFAULT_PATH = data_file("locomo10.json")
_EVIDENCE = re.compile(r"D(\d+):(\d+)")


@dataclass(frozen=True)
class Question:
    conversation: int
    question: str
    category: int
    evidence: tuple[str, ...]  # dialogue ids


@dataclass(frozen=True)
class Conversation:
    turns: tuple[str, ...]  # one unit per turn: "[date] speaker: text"
    texts: dict[str, str]  # dialogue id -> "speaker: text" (what must be in the memory)


def _turn_text(turn: dict) -> str:
    text = " ".join(str(turn.get("text", "")).split())
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares an image: {' '.join(str(caption).split())}]"
    return f"{turn['speaker']}: {text}"


def load(
    path: Path = DEFAULT_PATH, *, with_dates: bool = True
) -> tuple[list[Conversation], list[Question], int]:
    """Conversations, answerable questions (categories 1-4 with valid evidence), and skips."""
    data = json.loads(path.read_text())
    conversations: list[Conversation] = []
    questions: list[Question] = []
    skipped = 0
    for index, sample in enumerate(data):
        conv = sample["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k)),
        )
        turns: list[str] = []
        texts: dict[str, str] = {}
        for number in sessions:
            date = conv.get(f"session_{number}_date_time", "")
            for turn in conv[f"session_{number}"]:
                text = _turn_text(turn)
                texts[turn["dia_id"]] = text
                turns.append(f"[{date}] {text}" if with_dates and date else text)
        conversations.append(Conversation(tuple(turns), texts))
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = qa.get("evidence") or []
            ids = []
            valid = bool(evidence)
            for item in evidence:
                if not _EVIDENCE.fullmatch(str(item).strip()) or str(item).strip() not in texts:
                    valid = False
                    break
                ids.append(str(item).strip())
            if not valid:
                skipped += 1
                continue
            questions.append(Question(index, str(qa["question"]), int(qa["category"]), tuple(ids)))
    return conversations, questions, skipped


def recall(memory: str, conversation: Conversation, question: Question) -> float:
    found = sum(1 for dia in question.evidence if conversation.texts[dia] in memory)
    return found / len(question.evidence)


if __name__ == "__main__":  # a quick look: python -m benchmarks.locomo
    convs, qs, skipped = load()
    print(len(convs), "conversations", len(qs), "questions", skipped, "skipped")
    print(json.dumps(convs[0].turns[:3], indent=1))
