"""What one logical request did, and why: a stable code beside the prose reason."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CODES", "Decision"]

#: Every decision code, with what it means. Tests and integrations match on codes, never prose.
CODES: dict[str, str] = {
    # rewritten
    "compiled": "old history or finished work was compiled into memory (a prefix-cache miss)",
    "reused": "the frozen memory was sent again; the prefix is unchanged",
    "safe_compaction": (
        "the memory could not be compiled (the compiler failed, or not within the deadline), so "
        "the safe compaction went out: every call named, the tools' output left out"
    ),
    # sent unchanged
    "fits": "the request fits the window; nothing is rewritten",
    "unknown_model": "no profile, no deployment_context_limit and no context_target",
    "native_pause": "the host is compacting natively",
    "native_cooldown": "a native compaction just completed; a few requests pass through",
    "agent_compaction": "the agent's own compaction request (it summarises its history itself)",
    "backoff": "a context-size hint first crossed a back-off threshold",
    "unsupported_content": "content that cannot be compiled (image, file, unknown item) would be",
    "no_shrink": "the compiled request would not be smaller",
    "nothing_to_compile": "everything left is protected (task, recent tail, pending protocol)",
    "no_task": "there is no user message and no task was given",
    "invalid_request": "the request is not a shape the dialect can read",
    "pairing_broken": "the history already breaks the provider's tool pairing rules",
    "server_history": "the provider holds the history (previous_response_id)",
    "thinking_bound": "signed thinking after the changed prefix would be rejected",
    "cannot_fit": "even the smallest rewrite would not fit the window",
}


@dataclass(frozen=True)
class Decision:
    """What one logical request did, and why.

    ``action`` is ``compiled`` (memory built or advanced: a prefix-cache miss), ``reused`` (the
    frozen memory sent again) or ``passthrough`` (the request sent unchanged); ``code`` is one of
    :data:`CODES`. Token figures are by ``counter``: an exact BPE count where the model's encoding
    is known and installed, else a calibrated lexical estimate; neither is provider billing.
    """

    request: int
    action: str
    code: str
    reason: str
    model: str
    api: str
    policy: str
    tokens_before: int
    tokens_after: int
    effective_window: int | None
    output_reserve: int
    counter: str
    memory_budget: int | None
    memory_tokens: int | None
    compiled_messages: int
    rebuilds: int
    context_hint: int | None
    hint_source: str | None
    compile_latency_s: float
    applied_strategy: str | None
    #: The prompt size the request was kept at or under, when a context target applied.
    context_target: int | None = None
    #: For a compiled request: ``"build"`` (the first memory), ``"append"`` (one more block after
    #: the frozen ones, whose cached prefix stays valid) or ``"merge"`` (the memory built whole
    #: again).
    rebuild: str | None = None
    #: How long deciding the request took (seconds, measured: planning, compiling, finishing).
    prepare_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
