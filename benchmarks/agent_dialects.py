"""The `tomc` method of the agent replay in each wire format, compared request by request.

Chat is the reference: the `tomc` method itself. Every other dialect replays the same requests
converted by ``benchmarks.dialect_convert``; what it sends comes back as Chat messages and is
measured by the same counts. This module compares the two runs request by request: where the
decision, the prompt sent or the evidence kept differ, and the first divergence of each
trajectory with the session's own counts on both sides (the usual cause of a different
decision is a different estimate near a threshold).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchmarks.agent_replay import Step

REFERENCE = "chat"


@dataclass
class Comparison:
    """One dialect against chat at one window, over every trajectory."""

    window: int
    dialect: str
    requests: int = 0
    other_decision: int = 0  # requests whose decision code differs from chat's
    other_prompt: int = 0  # requests that sent a different number of o200k tokens
    other_evidence: int = 0  # requests that kept a different number of evidence lines
    trajectories: list[str] = field(default_factory=list)  # those with any difference
    first: list[dict[str, Any]] = field(default_factory=list)  # first divergence of each
    transitions: Counter = field(default_factory=Counter)  # "chat code -> dialect code"
    estimate_deltas: list[int] = field(default_factory=list)  # dialect - chat, every request

    def add(self, trajectory: str, chat: Sequence[Step], other: Sequence[Step]) -> None:
        """Compare one trajectory's two runs (the same requests in the same order)."""
        if [step.k for step in chat] != [step.k for step in other]:
            raise ValueError(f"{trajectory}: the two runs replayed different requests")
        first: dict[str, Any] | None = None
        for mine, theirs in zip(chat, other, strict=True):
            self.requests += 1
            decision = mine.reason != theirs.reason
            prompt = mine.total != theirs.total
            evidence = mine.kept != theirs.kept
            self.other_decision += decision
            self.other_prompt += prompt
            self.other_evidence += evidence
            if decision:
                self.transitions[f"{mine.reason} -> {theirs.reason}"] += 1
            if mine.estimate is not None and theirs.estimate is not None:
                self.estimate_deltas.append(theirs.estimate - mine.estimate)
            if first is None and (decision or prompt or evidence):
                first = {
                    "trajectory": trajectory,
                    "request": mine.k,
                    "chat": mine.reason,
                    self.dialect: theirs.reason,
                    "chat_estimate": mine.estimate,
                    f"{self.dialect}_estimate": theirs.estimate,
                    "chat_sent": mine.total,
                    f"{self.dialect}_sent": theirs.total,
                }
        if first is not None:
            self.trajectories.append(trajectory)
            self.first.append(first)

    @property
    def identical(self) -> bool:
        return not (self.other_decision or self.other_prompt or self.other_evidence)

    def to_dict(self) -> dict[str, Any]:
        deltas = sorted(self.estimate_deltas)
        return {
            "window": self.window,
            "dialect": self.dialect,
            "requests": self.requests,
            "identical": self.identical,
            "other_decision": self.other_decision,
            "other_prompt": self.other_prompt,
            "other_evidence": self.other_evidence,
            "trajectories": list(self.trajectories),
            "first": list(self.first),
            "transitions": dict(sorted(self.transitions.items())),
            "estimate_delta": {
                "min": deltas[0] if deltas else None,
                "median": deltas[len(deltas) // 2] if deltas else None,
                "max": deltas[-1] if deltas else None,
            },
        }
