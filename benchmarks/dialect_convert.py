"""Chat Completions requests in Anthropic Messages and OpenAI Responses shape, and back.

The agent-trajectory replay records Chat Completions requests; to measure the session in every
wire format it sends each request in the other two shapes and reads what the session sends back
as Chat messages again, so one counting and evidence machinery measures all three.

Forward (a Chat request with system messages, user and assistant messages, assistant
``tool_calls``, ``role: "tool"`` results, ``tools`` and ``max_tokens``):

- **Messages**: the leading system (and developer) messages become the top-level ``system``
  string; user and assistant messages carry content blocks; each tool call becomes a
  ``tool_use`` block whose ``input`` is the parsed JSON arguments; a run of ``role: "tool"``
  messages becomes one user message of ``tool_result`` blocks in the order of the calls; tools
  become ``{name, description, input_schema}``.
- **Responses**: the leading system messages become ``instructions``; user and assistant
  messages become ``message`` items with ``input_text`` / ``output_text`` parts; each tool call
  becomes a ``function_call`` item right after its assistant's text; each result a
  ``function_call_output`` item; tools become ``{"type": "function", name, description,
  parameters}``; ``max_tokens`` becomes ``max_output_tokens``.

``reasoning_content`` (a field some Chat providers add to assistant messages) becomes, with
``reasoning="native"``, a ``thinking`` block (first in the assistant's content, with a
placeholder ``signature``: these requests never reach a provider) or a ``reasoning`` item with a
summary (before the assistant's message); with ``reasoning="drop"`` it is left out, and noted.

Backward, :func:`messages_to_chat` and :func:`responses_to_chat` read any list a session sends in
those formats, a TOMC memory item included, into Chat messages. A round trip gives back the same
messages except for these normalisations (each one is noted by the forward conversion or holds
for every request):

- several leading system messages come back as one, their texts joined by a blank line;
  a list of text parts in a message comes back as one string (parts joined by a newline);
- tool arguments come back as ``json.dumps(input, ensure_ascii=False)`` (Messages only; the
  form the recorded trajectories already use), and arguments that were not a JSON object come
  back as ``{"raw": text}`` serialised;
- tool results come back in the order of the calls they answer (Messages only);
- an assistant message without text comes back with ``content: ""``; in Responses, one without
  text whose calls directly follow another assistant message merges into that message (the
  format has no boundary between them);
- fields with no counterpart in the target format (``name``, ``refusal``, request options other
  than the ones above) are dropped, and noted.

:class:`RequestConverter` does the same for the many requests of one conversation: items are
converted once per source message (by object identity) and, on the way back, items the session
left in place come back as the very source messages, so a long replay costs about its new
messages. Everything here is pure and deterministic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DIALECTS",
    "REASONING",
    "ConversionError",
    "Converted",
    "RequestConverter",
    "chat_to_messages",
    "chat_to_responses",
    "messages_to_chat",
    "responses_to_chat",
]

DIALECTS = ("chat", "messages", "responses")
REASONING = ("native", "drop")
_INSTRUCTION_ROLES = frozenset({"system", "developer"})
# Options with the same meaning in all three formats; every other option is dropped and noted.
_SHARED_OPTIONS = ("model", "temperature", "top_p", "stream")
_CONVERTED_OPTIONS = frozenset({"messages", "tools", "max_tokens", "max_completion_tokens"})
_MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "reasoning_content"})


class ConversionError(ValueError):
    """A Chat request that has no faithful form in the target format; names the problem."""


@dataclass(frozen=True)
class Converted:
    """A converted request body and what the conversion could not carry over exactly."""

    body: dict[str, Any]
    notes: tuple[str, ...] = ()


def chat_to_messages(request: Mapping[str, Any], *, reasoning: str = "native") -> Converted:
    """The Anthropic Messages body for a Chat Completions request."""
    converter = RequestConverter("messages", reasoning=reasoning)
    body = converter.body(request)
    return Converted(body, converter.notes)


def chat_to_responses(request: Mapping[str, Any], *, reasoning: str = "native") -> Converted:
    """The OpenAI Responses body for a Chat Completions request."""
    converter = RequestConverter("responses", reasoning=reasoning)
    body = converter.body(request)
    return Converted(body, converter.notes)


# ------------------------------------------------------------------ forward, per message


def _text(content: Any, where: str) -> str:
    """The text of Chat content: a string, ``None`` or a list of text parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise ConversionError(f"{where}: a {kind} content part has no converter here")
        return "\n".join(texts)
    raise ConversionError(f"{where}: content of type {type(content).__name__}")


def _calls(message: Mapping[str, Any], where: str) -> list[tuple[str, str, str]]:
    """``(id, name, raw arguments)`` of every tool call of an assistant message."""
    calls = []
    for position, call in enumerate(message.get("tool_calls") or ()):
        if not isinstance(call, Mapping) or not isinstance(call.get("id"), str):
            raise ConversionError(f"{where}: tool call {position} has no string id")
        if call.get("type", "function") != "function":
            raise ConversionError(f"{where}: a {call.get('type')!r} tool call")
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append((call["id"], str(function.get("name", "")), arguments))
    return calls


def _input(arguments: str, where: str, notes: list[str]) -> dict[str, Any]:
    """A tool_use ``input``: the JSON object of the arguments, else ``{"raw": text}``."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value
    notes.append(f"{where}: arguments are not a JSON object; sent as {{'raw': text}}")
    return {"raw": arguments}


def _dropped_fields(message: Mapping[str, Any], where: str, notes: list[str]) -> None:
    for key, value in message.items():
        if key not in _MESSAGE_FIELDS and value not in (None, "", [], {}):
            notes.append(f"{where}: field {key!r} has no counterpart and is dropped")


def _signature(text: str) -> str:
    # A placeholder, deterministic per text: converted requests never reach a provider.
    return "replay-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _anthropic_turn(
    message: Mapping[str, Any], where: str, reasoning: str, notes: list[str]
) -> dict[str, Any]:
    role = message.get("role")
    _dropped_fields(message, where, notes)
    blocks: list[dict[str, Any]] = []
    thought = message.get("reasoning_content")
    if role == "assistant" and isinstance(thought, str) and thought:
        if reasoning == "native":
            blocks.append(
                {"type": "thinking", "thinking": thought, "signature": _signature(thought)}
            )
        else:
            notes.append(f"{where}: reasoning_content dropped")
    text = _text(message.get("content"), where)
    if text:  # Anthropic rejects empty text blocks
        blocks.append({"type": "text", "text": text})
    if role == "assistant":
        for call_id, name, arguments in _calls(message, where):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": name,
                    "input": _input(arguments, f"{where} call {call_id}", notes),
                }
            )
    elif message.get("tool_calls"):
        raise ConversionError(f"{where}: tool_calls outside an assistant message")
    if not blocks:
        raise ConversionError(f"{where}: a {role} message with no text has no Anthropic form")
    return {"role": role, "content": blocks}


def _anthropic_results(
    run: Sequence[Mapping[str, Any]],
    caller: Mapping[str, Any] | None,
    where: str,
    notes: list[str],
) -> dict[str, Any]:
    if caller is None:
        raise ConversionError(f"{where}: tool results without an assistant tool call before them")
    order = {call_id: rank for rank, (call_id, _, _) in enumerate(_calls(caller, where))}
    results = []
    for offset, message in enumerate(run):
        call_id = message.get("tool_call_id")
        if call_id not in order:
            raise ConversionError(
                f"{where}: tool result {call_id!r} answers no call of the assistant before it"
            )
        _dropped_fields(message, where, notes)
        content = message.get("content")
        if isinstance(content, list):
            body: Any = [{"type": "text", "text": _text([part], where)} for part in content]
        else:
            body = _text(content, where)
        results.append(
            (
                order[call_id],
                offset,
                {"type": "tool_result", "tool_use_id": call_id, "content": body},
            )
        )
    if [rank for rank, _, _ in results] != sorted(rank for rank, _, _ in results):
        notes.append(f"{where}: tool results reordered to the order of their calls")
    results.sort(key=lambda result: result[:2])
    return {"role": "user", "content": [block for _, _, block in results]}


def _responses_items(
    message: Mapping[str, Any], where: str, reasoning: str, notes: list[str]
) -> tuple[dict[str, Any], ...]:
    role = message.get("role")
    _dropped_fields(message, where, notes)
    if role == "tool":
        content = message.get("content")
        output = _text(content, where)
        return (
            {
                "type": "function_call_output",
                "call_id": str(message.get("tool_call_id")),
                "output": output,
            },
        )
    text = _text(message.get("content"), where)
    if role != "assistant":
        if message.get("tool_calls"):
            raise ConversionError(f"{where}: tool_calls outside an assistant message")
        return (
            {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]},
        )
    items: list[dict[str, Any]] = []
    calls = _calls(message, where)
    thought = message.get("reasoning_content")
    if isinstance(thought, str) and thought:
        if reasoning == "native":
            anchor = calls[0][0] if calls else _signature(thought)[7:]
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{anchor}",
                    "summary": [{"type": "summary_text", "text": thought}],
                }
            )
        else:
            notes.append(f"{where}: reasoning_content dropped")
    if text or not calls:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        )
    for call_id, name, arguments in calls:
        items.append(
            {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
        )
    return tuple(items)


def _system_text(sources: Sequence[Mapping[str, Any]], notes: list[str]) -> str:
    texts = [_text(m.get("content"), f"message {i}") for i, m in enumerate(sources)]
    if len(texts) > 1:
        notes.append(f"{len(texts)} leading system messages joined into one")
    for index, message in enumerate(sources):
        _dropped_fields(message, f"message {index}", notes)
    return "\n\n".join(texts)


def _tools(tools: Sequence[Any], dialect: str) -> list[dict[str, Any]]:
    converted = []
    for position, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            raise ConversionError(f"tool {position} is not a function tool")
        function = tool.get("function") or {}
        if not isinstance(function.get("name"), str):
            raise ConversionError(f"tool {position} has no name")
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if dialect == "messages":
            schema: dict[str, Any] = {"name": function["name"]}
            if function.get("description"):
                schema["description"] = function["description"]
            schema["input_schema"] = parameters
        else:
            schema = {"type": "function", "name": function["name"]}
            if function.get("description"):
                schema["description"] = function["description"]
            schema["parameters"] = parameters
            if "strict" in function:
                schema["strict"] = function["strict"]
        converted.append(schema)
    return converted


# ------------------------------------------------------------------ the cached converter


class RequestConverter:
    """Converts the Chat requests of one conversation to ``dialect`` and reads them back.

    Every source message (and every run of tool results) is converted once, cached by object
    identity; the cache keeps its sources alive, so an id is never reused while it is cached.
    ``back`` returns the very source messages for items a session sent unchanged (when their
    conversion is exact: reading the items back gives the sources), and reads anything else (a
    memory item, a lossy conversion) with :func:`messages_to_chat` / :func:`responses_to_chat`.
    ``chat`` converts nothing: the request goes out as it is.
    """

    def __init__(self, dialect: str, *, reasoning: str = "native") -> None:
        if dialect not in DIALECTS:
            raise ConversionError(f"dialect must be one of {', '.join(DIALECTS)}, not {dialect!r}")
        if reasoning not in REASONING:
            raise ConversionError(f"reasoning must be one of {', '.join(REASONING)}")
        self.dialect = dialect
        self.reasoning = reasoning
        self._notes: dict[str, None] = {}
        # id(first source) -> (sources, caller, items): one cached conversion.
        self._cache: dict[int, tuple[tuple[Any, ...], Any, tuple[dict[str, Any], ...]]] = {}
        # id(item) -> (item, the items of its group, their sources): for ``back``.
        self._origin: dict[int, tuple[Any, tuple[Any, ...], tuple[Any, ...]]] = {}
        self._system: tuple[tuple[Any, ...], str] | None = None
        self._tools: tuple[Any, list[dict[str, Any]]] | None = None

    @property
    def notes(self) -> tuple[str, ...]:
        """Every distinct note of the conversions so far, in order."""
        return tuple(self._notes)

    # -- forward

    def body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The request in this converter's format."""
        if self.dialect == "chat":
            return dict(request)
        messages = request.get("messages")
        if not isinstance(messages, list | tuple):
            raise ConversionError(f"messages is a {type(messages).__name__}, not a list")
        notes: list[str] = []
        body: dict[str, Any] = {key: request[key] for key in _SHARED_OPTIONS if key in request}
        for key in request:
            if key not in _SHARED_OPTIONS and key not in _CONVERTED_OPTIONS:
                notes.append(f"request option {key!r} has no converter and is dropped")
        head = 0
        while head < len(messages) and _role(messages[head]) in _INSTRUCTION_ROLES:
            head += 1
        if head:
            body["system" if self.dialect == "messages" else "instructions"] = self._system_of(
                tuple(messages[:head]), notes
            )
        tools = request.get("tools")
        if tools:
            body["tools"] = self._tools_of(tools)
        reserve = request.get("max_completion_tokens") or request.get("max_tokens")
        if reserve is not None:
            body["max_tokens" if self.dialect == "messages" else "max_output_tokens"] = reserve
        elif self.dialect == "messages":
            notes.append("max_tokens is missing (Anthropic requires it)")
        key = "messages" if self.dialect == "messages" else "input"
        body[key] = self._items(messages, head, notes)
        for note in notes:
            self._notes.setdefault(note)
        return body

    def _system_of(self, sources: tuple[Any, ...], notes: list[str]) -> str:
        cached = self._system
        if cached is None or not _same_objects(cached[0], sources):
            cached = self._system = (sources, _system_text(sources, notes))
        return cached[1]

    def _tools_of(self, tools: Any) -> list[dict[str, Any]]:
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, _tools(tools, self.dialect))
        return self._tools[1]

    def _items(self, messages: Sequence[Any], start: int, notes: list[str]) -> list[Any]:
        items: list[Any] = []
        caller: Any = None
        index = start
        while index < len(messages):
            message = messages[index]
            role = _role(message)
            where = f"message {index}"
            if role in _INSTRUCTION_ROLES and self.dialect == "messages":
                raise ConversionError(
                    f"{where}: a {role} message after the conversation started has no "
                    "Anthropic form"
                )
            if role not in ("user", "assistant", "tool", *_INSTRUCTION_ROLES):
                raise ConversionError(f"{where}: unsupported role {role!r}")
            if role == "tool" and self.dialect == "messages":
                end = index
                while end < len(messages) and _role(messages[end]) == "tool":
                    end += 1
                sources = tuple(messages[index:end])
                items.extend(self._convert(sources, caller, where, notes))
                index = end
                continue
            items.extend(self._convert((message,), None, where, notes))
            if role != "tool":
                caller = message if role == "assistant" else None
            index += 1
        return items

    def _convert(
        self, sources: tuple[Any, ...], caller: Any, where: str, notes: list[str]
    ) -> tuple[dict[str, Any], ...]:
        cached = self._cache.get(id(sources[0]))
        if cached is not None and _same_objects(cached[0], sources) and cached[1] is caller:
            return cached[2]
        if self.dialect == "messages":
            if _role(sources[0]) == "tool":
                items: tuple[dict[str, Any], ...] = (
                    _anthropic_results(sources, caller, where, notes),
                )
            else:
                items = (_anthropic_turn(sources[0], where, self.reasoning, notes),)
        else:
            items = _responses_items(sources[0], where, self.reasoning, notes)
        self._cache[id(sources[0])] = (sources, caller, items)
        if self._read(list(items)) == list(sources):
            # Only an exact conversion may come back as its sources; a lossy one (a dropped
            # field, reordered results) comes back as what was actually sent.
            for item in items:
                self._origin[id(item)] = (item, items, sources)
        return items

    # -- backward

    def back(self, body: Mapping[str, Any]) -> list[Any]:
        """What a session sent, as Chat messages: the source messages where items are unchanged."""
        if self.dialect == "chat":
            return list(body["messages"])
        messages: list[Any] = []
        instructions = body.get("system" if self.dialect == "messages" else "instructions")
        if instructions is not None:
            cached = self._system
            if cached is not None and cached[1] is instructions:
                messages.extend(cached[0])
            else:
                messages.append({"role": "system", "content": _instructions_text(instructions)})
        items = body.get("messages" if self.dialect == "messages" else "input") or []
        foreign: list[Any] = []
        index = 0
        while index < len(items):
            item = items[index]
            origin = self._origin.get(id(item))
            if origin is not None and origin[0] is item and origin[1][0] is item:
                group = origin[1]
                window = items[index : index + len(group)]
                if _same_objects(window, group):
                    messages.extend(self._read(foreign))
                    foreign = []
                    messages.extend(origin[2])
                    index += len(group)
                    continue
            foreign.append(item)
            index += 1
        messages.extend(self._read(foreign))
        return messages

    def _read(self, items: list[Any]) -> list[dict[str, Any]]:
        if not items:
            return []
        if self.dialect == "messages":
            return messages_to_chat({"messages": items})
        return responses_to_chat({"input": items})


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _instructions_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # Anthropic system blocks
        return "\n".join(
            str(block.get("text", "")) for block in value if isinstance(block, Mapping)
        )
    raise ConversionError(f"instructions of type {type(value).__name__}")


# ------------------------------------------------------------------ backward


def _parts(content: Any, where: str) -> str:
    """Text of Anthropic blocks or Responses parts (a string, or text parts)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise ConversionError(f"{where}: content of type {type(content).__name__}")
    texts = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"):
            texts.append(str(part.get("text", "")))
        else:
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            raise ConversionError(f"{where}: a {kind} part has no Chat form here")
    return "\n".join(texts)


def _chat_call(call_id: Any, name: Any, arguments: str) -> dict[str, Any]:
    return {
        "id": str(call_id),
        "type": "function",
        "function": {"name": str(name), "arguments": arguments},
    }


def _chat_result(call_id: Any, content: Any, where: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": str(call_id), "content": _parts(content, where)}


def messages_to_chat(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Chat messages for an Anthropic Messages body (``system`` and ``messages``)."""
    out: list[dict[str, Any]] = []
    if body.get("system"):
        out.append({"role": "system", "content": _instructions_text(body["system"])})
    for index, message in enumerate(body.get("messages") or ()):
        where = f"message {index}"
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise ConversionError(f"{where}: not a user or assistant message")
        role, content = message["role"], message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise ConversionError(f"{where}: content of type {type(content).__name__}")
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "thinking" and role == "assistant":
                thinking.append(str(block.get("thinking", "")))
            elif kind == "tool_use" and role == "assistant":
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
                calls.append(_chat_call(block.get("id"), block.get("name"), arguments))
            elif kind == "tool_result" and role == "user":
                out.append(_chat_result(block.get("tool_use_id"), block.get("content"), where))
            else:
                raise ConversionError(f"{where}: a {kind} block has no Chat form here")
        if role == "assistant":
            chat: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
            if thinking:
                chat["reasoning_content"] = "\n".join(thinking)
            if calls:
                chat["tool_calls"] = calls
            out.append(chat)
        elif texts:
            out.append({"role": "user", "content": "\n".join(texts)})
    return out


def responses_to_chat(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Chat messages for an OpenAI Responses body (``instructions`` and ``input``)."""
    out: list[dict[str, Any]] = []
    if body.get("instructions"):
        out.append({"role": "system", "content": _instructions_text(body["instructions"])})
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    # The assistant message a function_call belongs to: the one made by the item just before.
    turn: dict[str, Any] | None = None
    reasoning: list[str] = []
    for index, item in enumerate(items):
        where = f"input item {index}"
        if not isinstance(item, Mapping):
            raise ConversionError(f"{where}: not an object")
        kind = item.get("type", "message")
        if kind == "reasoning":
            reasoning.extend(
                str(part.get("text", ""))
                for part in item.get("summary") or ()
                if isinstance(part, Mapping)
            )
            continue
        if kind == "message":
            role = item.get("role")
            text = _parts(item.get("content"), where)
            if role == "assistant":
                turn = {"role": "assistant", "content": text}
                if reasoning:
                    turn["reasoning_content"], reasoning = "\n".join(reasoning), []
                out.append(turn)
                continue
            if role not in ("user", "system", "developer"):
                raise ConversionError(f"{where}: role {role!r}")
            out.append({"role": role, "content": text})
        elif kind == "function_call":
            if turn is None:
                turn = {"role": "assistant", "content": ""}
                if reasoning:
                    turn["reasoning_content"], reasoning = "\n".join(reasoning), []
                out.append(turn)
            arguments = item.get("arguments", "")
            turn.setdefault("tool_calls", []).append(
                _chat_call(item.get("call_id"), item.get("name"), str(arguments))
            )
            continue
        elif kind == "function_call_output":
            out.append(_chat_result(item.get("call_id"), item.get("output"), where))
        else:
            raise ConversionError(f"{where}: a {kind} item has no Chat form here")
        turn = None
    if reasoning:
        raise ConversionError("a reasoning item with no assistant item after it")
    return out
