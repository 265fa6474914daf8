"""The providers' wire shapes, as pure functions: what the fake provider sends back.

Chat Completions (``chat.completion`` objects and ``data:`` chunks ending in ``data: [DONE]``),
Anthropic Messages (``message`` objects and the ``event:``/``data:`` sequence from
``message_start`` to ``message_stop``, with ``ping``) and OpenAI Responses (``response`` objects
and the ``response.*`` sequence ending in ``response.completed``, without ``[DONE]``), each as the
real APIs send them. Everything is a function of the request body, its number and the reply
settings (:mod:`tomc.testing.replies`, whose names are repeated here), so the fake's output is
deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .replies import (
    CREATED,
    KINDS,
    ProviderError,
    Reply,
    Usage,
    _arguments,
    _encrypted,
    _pieces,
    _signature,
    anthropic_error,
    models_list,
    openai_error,
    sse,
    stream_error,
)

__all__ = [
    "KINDS",
    "ProviderError",
    "Reply",
    "Usage",
    "anthropic_error",
    "anthropic_message",
    "anthropic_stream",
    "chat_completion",
    "chat_stream",
    "compacted_response",
    "models_list",
    "openai_error",
    "response_object",
    "responses_stream",
    "sse",
    "stream_error",
]


# ---------------------------------------------------------------------- Chat Completions


def _chat_usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.prompt_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_base(body: Mapping[str, Any], number: int, obj: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-fake{number:06d}",
        "object": obj,
        "created": CREATED + number,
        "model": body.get("model", ""),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _chat_call(number: int, reply: Reply) -> dict[str, Any]:
    return {
        "id": f"call_fake{number:06d}",
        "type": "function",
        "function": {"name": reply.tool_name, "arguments": _arguments(reply)},
    }


def chat_completion(body: Mapping[str, Any], number: int, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text,
        "refusal": None,
        "annotations": [],
    }
    finish = "stop"
    if reply.kind != "text":
        message["content"] = None
        message["tool_calls"] = [_chat_call(number, reply)]
        finish = "tool_calls"
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return {
        **_chat_base(body, number, "chat.completion"),
        "choices": [choice],
        "usage": _chat_usage(reply.usage),
    }


def _delta(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def chat_stream(body: Mapping[str, Any], number: int, reply: Reply) -> list[bytes]:
    base = _chat_base(body, number, "chat.completion.chunk")
    chunks: list[dict[str, Any]] = []
    if reply.kind == "text":
        chunks.append({**base, "choices": [_delta({"role": "assistant", "content": ""})]})
        for piece in _pieces(reply.text, reply.chunk_size):
            chunks.append({**base, "choices": [_delta({"content": piece})]})
        finish = "stop"
    else:
        call = _chat_call(number, reply)
        opening = {**call, "index": 0, "function": {"name": reply.tool_name, "arguments": ""}}
        first = {"role": "assistant", "content": None, "tool_calls": [opening]}
        chunks.append({**base, "choices": [_delta(first)]})
        for piece in _pieces(call["function"]["arguments"], reply.chunk_size * 3):
            part = {"index": 0, "function": {"arguments": piece}}
            chunks.append({**base, "choices": [_delta({"tool_calls": [part]})]})
        finish = "tool_calls"
    chunks.append({**base, "choices": [_delta({}, finish_reason=finish)]})
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": _chat_usage(reply.usage)})
    return [sse(None, chunk) for chunk in chunks] + [sse(None, "[DONE]")]


# ---------------------------------------------------------------------- Anthropic Messages


def _anthropic_usage(usage: Usage, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _anthropic_blocks(number: int, reply: Reply) -> tuple[list[dict[str, Any]], str]:
    tool = {
        "type": "tool_use",
        "id": f"toolu_01Fake{number:012d}",
        "name": reply.tool_name,
        "input": dict(reply.tool_input),
    }
    if reply.kind == "text":
        return [{"type": "text", "text": reply.text}], "end_turn"
    if reply.kind == "tool_call":
        return [{"type": "text", "text": reply.text}, tool], "tool_use"
    thinking = {
        "type": "thinking",
        "thinking": reply.thinking,
        "signature": _signature(number, reply.thinking),
    }
    return [thinking, tool], "tool_use"


def _message_shell(
    body: Mapping[str, Any], number: int, binding_beta: bool, reply: Reply
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": f"msg_01Fake{number:014d}",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": body.get("model", ""),
        "stop_reason": None,
        "stop_sequence": None,
    }
    if binding_beta:  # only with the thinking-binding beta header (notes, section 2)
        message["input_transformations"] = [dict(t) for t in reply.input_transformations]
    return message


def anthropic_message(
    body: Mapping[str, Any], number: int, reply: Reply, *, binding_beta: bool = False
) -> dict[str, Any]:
    blocks, stop = _anthropic_blocks(number, reply)
    return {
        **_message_shell(body, number, binding_beta, reply),
        "content": blocks,
        "stop_reason": stop,
        "usage": _anthropic_usage(reply.usage, reply.usage.output_tokens),
    }


def _block_events(index: int, block: Mapping[str, Any], reply: Reply) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "text":
        start = {"type": "text", "text": ""}
        deltas = [
            {"type": "text_delta", "text": piece}
            for piece in _pieces(block["text"], reply.chunk_size)
        ]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": piece}
            for piece in _pieces(block["thinking"], reply.chunk_size * 4)
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:  # tool_use: the input arrives as JSON fragments, the first one empty
        start = {**block, "input": {}}
        arguments = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": ""}] + [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in _pieces(arguments, reply.chunk_size * 3)
        ]
    events = [{"type": "content_block_start", "index": index, "content_block": start}]
    events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
    events.append({"type": "content_block_stop", "index": index})
    return events


def anthropic_stream(
    body: Mapping[str, Any], number: int, reply: Reply, *, binding_beta: bool = False
) -> list[bytes]:
    blocks, stop = _anthropic_blocks(number, reply)
    start = {
        **_message_shell(body, number, binding_beta, reply),
        "usage": _anthropic_usage(reply.usage, 1),
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(blocks):
        block_events = _block_events(index, block, reply)
        events.extend(block_events[:1])
        if index == 0:
            events.append({"type": "ping"})  # as the API does, between start and first delta
        events.extend(block_events[1:])
    usage = {
        "input_tokens": reply.usage.input_tokens,
        "cache_creation_input_tokens": reply.usage.cache_write_tokens,
        "cache_read_input_tokens": reply.usage.cache_read_tokens,
        "output_tokens": reply.usage.output_tokens,
    }
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": usage,
        }
    )
    events.append({"type": "message_stop"})
    return [sse(event["type"], event) for event in events]


# ---------------------------------------------------------------------- OpenAI Responses


def _responses_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.output_tokens,
    }


def _output_items(body: Mapping[str, Any], number: int, reply: Reply) -> list[dict[str, Any]]:
    items = body.get("input")
    last = items[-1] if isinstance(items, list) and items else None
    if isinstance(last, Mapping) and last.get("type") == "compaction_trigger":
        # Codex's compaction request: exactly one compaction item comes back.
        return [_compaction_item(number, items)]
    if reply.kind == "text":
        part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        message = {
            "id": f"msg_fake{number:06d}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        return [message]
    call = {
        "id": f"fc_fake{number:06d}",
        "type": "function_call",
        "status": "completed",
        "call_id": f"call_fake{number:06d}",
        "name": reply.tool_name,
        "arguments": _arguments(reply),
    }
    if reply.kind == "tool_call":
        return [call]
    reasoning: dict[str, Any] = {
        "id": f"rs_fake{number:06d}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": reply.thinking}],
    }
    if "reasoning.encrypted_content" in (body.get("include") or ()):
        reasoning["encrypted_content"] = _encrypted(number, reply.thinking)
    return [reasoning, call]


def response_object(
    body: Mapping[str, Any],
    number: int,
    reply: Reply,
    *,
    status: str = "completed",
    output: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Response object echoing the request's settings, as the API does."""
    done = status == "completed"
    items = list(output) if output is not None else _output_items(body, number, reply)
    return {
        "id": f"resp_fake{number:06d}",
        "object": "response",
        "created_at": CREATED + number,
        "status": status,
        "completed_at": CREATED + number + 1 if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model", ""),
        "output": items if done else [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "service_tier": body.get("service_tier") or "default",
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": _responses_usage(reply.usage) if done else None,
        "metadata": body.get("metadata") or {},
    }


def _item_events(index: int, item: Mapping[str, Any], reply: Reply) -> list[dict[str, Any]]:
    kind = item["type"]
    item_id = item["id"]
    common = {"item_id": item_id, "output_index": index}
    if kind == "message":
        text = item["content"][0]["text"]
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        opening = {**item, "status": "in_progress", "content": []}
        events = [{"type": "response.output_item.added", "output_index": index, "item": opening}]
        part = {**common, "content_index": 0}
        events.append({"type": "response.content_part.added", **part, "part": empty})
        for piece in _pieces(text, reply.chunk_size):
            events.append(
                {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
            )
        events.append({"type": "response.output_text.done", **part, "text": text, "logprobs": []})
        events.append({"type": "response.content_part.done", **part, "part": item["content"][0]})
    elif kind == "function_call":
        opening = {**item, "status": "in_progress", "arguments": ""}
        events = [{"type": "response.output_item.added", "output_index": index, "item": opening}]
        for piece in _pieces(item["arguments"], reply.chunk_size * 3):
            events.append(
                {"type": "response.function_call_arguments.delta", **common, "delta": piece}
            )
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **common,
                "name": item["name"],
                "arguments": item["arguments"],
            }
        )
    elif kind == "compaction":
        opening = {"id": item_id, "type": "compaction"}
        events = [{"type": "response.output_item.added", "output_index": index, "item": opening}]
    else:  # reasoning: the summary streams; encrypted_content only on output_item.done
        opening = {"id": item_id, "type": "reasoning", "summary": []}
        events = [{"type": "response.output_item.added", "output_index": index, "item": opening}]
        summary = item["summary"][0]["text"]
        at = {**common, "summary_index": 0}
        empty = {"type": "summary_text", "text": ""}
        events.append({"type": "response.reasoning_summary_part.added", **at, "part": empty})
        for piece in _pieces(summary, reply.chunk_size * 4):
            events.append({"type": "response.reasoning_summary_text.delta", **at, "delta": piece})
        events.append({"type": "response.reasoning_summary_text.done", **at, "text": summary})
        events.append(
            {"type": "response.reasoning_summary_part.done", **at, "part": item["summary"][0]}
        )
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def responses_stream(body: Mapping[str, Any], number: int, reply: Reply) -> list[bytes]:
    final = response_object(body, number, reply)
    pending = response_object(body, number, reply, status="in_progress")
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    for index, item in enumerate(final["output"]):
        events.extend(_item_events(index, item, reply))
    events.append({"type": "response.completed", "response": final})
    framed = []
    for sequence, event in enumerate(events):
        numbered = {"type": event["type"], "sequence_number": sequence, **event}
        framed.append(sse(event["type"], numbered))
    return framed


def compacted_response(body: Mapping[str, Any], number: int, reply: Reply) -> dict[str, Any]:
    """``POST /responses/compact``: the input's user messages, then one compaction item.

    (A ``/responses`` request whose last input item is ``compaction_trigger`` gets the one
    compaction item as its output.)"""
    kept = []
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or item.get("type", "message") != "message":
            continue
        if item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
        kept.append(
            {
                "id": f"msg_cmp{number:04d}_{index:04d}",
                "type": "message",
                "status": "completed",
                "role": "user",
                "content": content,
            }
        )
    return {
        "id": f"resp_cmp_fake{number:06d}",
        "object": "response.compaction",
        "created_at": CREATED + number,
        "output": [*kept, _compaction_item(number, items)],
        "usage": _responses_usage(reply.usage),
    }


def _compaction_item(number: int, items: Any) -> dict[str, Any]:
    return {
        "id": f"cmp_fake{number:06d}",
        "type": "compaction",
        "encrypted_content": _encrypted(number, json.dumps(items, sort_keys=True, default=str)),
    }
