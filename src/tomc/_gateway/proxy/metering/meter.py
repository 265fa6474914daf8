"""Where one request's usage goes once its answer is out: one :class:`Meter` per request.

The meter owns the usage sniffer the relay feeds (:class:`UsageSniffer`), gives the
conversation's session the prompt size the provider reported, writes the usage ledger's entry,
hands the conversation back to the store once the ledger holds it, and notes an agent's own
compaction. Figures outside any conversation (paths only forwarded, requests the store could not
serve) are counted here too. Nothing here fails a request: it is bookkeeping.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from starlette.responses import Response, StreamingResponse

from ....chat import Decision
from ....chat.dialects import DIALECTS
from ..conversation import ConversationRecord
from ..exchange import Exchange
from ..routing import conversation_of
from ..store import Checkout, Conversations
from .ledger import Ledger, LedgerEntry
from .usage import MAX_SNIFF_BYTES, ProviderUsage, StreamUsage, usage_from_json

__all__ = ["Meter", "Spawner", "UsageSniffer"]

logger = logging.getLogger("tomc.gateway")

#: Runs store bookkeeping after the answer, without holding the request back.
Spawner = Callable[[Coroutine[Any, Any, None]], None]


class Meter:
    """One request's bookkeeping: ``sniffer`` goes to the relay, :meth:`done` runs once the
    answer has been relayed (or the client left), :meth:`relayed` once the response exists."""

    def __init__(
        self,
        exchange: Exchange,
        checkout: Checkout | None,
        *,
        ledger: Ledger,
        conversations: Conversations,
        spawn: Spawner,
    ) -> None:
        self.exchange = exchange
        self.checkout = checkout
        self.conversation = checkout.conversation if checkout is not None else None
        # Read now: the rewrite recorded it and nothing ran since (no await in between).
        conversation = self.conversation
        self.decision: Decision | None = conversation.last_decision if conversation else None
        dialect = exchange.dialect
        self.sniffer = UsageSniffer(dialect.name, dialect.prompt_tokens) if dialect else None
        self._ledger = ledger
        self._conversations = conversations
        self._spawn = spawn
        self.finished = False
        if dialect is None:
            self.count(passthrough_paths=1)
        elif conversation is None:
            self.count(unprepared=1)

    def count(self, **figures: int) -> None:
        """Figures outside a conversation: summed in a shared store, kept here otherwise."""
        if self._conversations.shared:
            self._spawn(self._conversations.count(Counter(figures)))

    def done(self, prompt_tokens: int | None, status: int) -> None:
        """The answer has been relayed: feed the session, write the ledger, hand back."""
        self.finished = True
        conversation, checkout = self.conversation, self.checkout
        if conversation is not None and prompt_tokens is not None and status < 400:
            # The whole usage when it was read (its cache reads check what the session priced
            # a rewrite at), else the prompt size alone.
            usage = self._usage()
            whole = usage is not None and usage.prompt_tokens == prompt_tokens
            conversation.session.observe_usage(usage if whole else prompt_tokens)
            assert checkout is not None
            checkout.changed()
        self._record(status)
        if checkout is not None:  # saved and released once the answer is out
            self._spawn(self._hand_back(checkout))
        if self.exchange.compaction is not None and status < 400:
            self._spawn(self._note_compaction())

    def relayed(self, response: Response) -> None:
        """The upstream was not reached (the gateway answered itself): hand back now."""
        streaming = isinstance(response, StreamingResponse)
        if self.checkout is not None and not self.finished and not streaming:
            self._spawn(self.checkout.finish())

    def _usage(self) -> ProviderUsage | None:
        """The answer's usage, billed at its model's own cache prices where its profile (in the
        conversation's session) gives them."""
        usage = self.sniffer.usage if self.sniffer is not None else None
        if usage is None or self.conversation is None:
            return usage
        return self.conversation.priced(usage, self.decision)

    def _record(self, status: int) -> None:
        """Hand a finished request's figures to the ledger (never fails the request)."""
        api = self.exchange.api
        if api is None and status < 400:
            return  # a path only forwarded counts only when the upstream refused it
        conversation = self.conversation
        try:
            usage = self._usage() if status < 400 else None
            key = conversation.key if conversation is not None else ""
            if usage is not None and conversation is not None:  # the request's account
                conversation.note_usage(usage)
            entry = LedgerEntry.of_request(api or "", key, status, self.decision, usage)
            self._ledger.record(entry)
        except Exception as exc:  # only bookkeeping
            logger.warning("usage not recorded (%s: %s)", type(exc).__name__, exc)

    async def _hand_back(self, checkout: Checkout) -> None:
        """Release the conversation once the ledger holds its request: a shared ledger's next
        direct estimate of it, in whichever process, starts from this one."""
        conversation: ConversationRecord | None = self.conversation
        if conversation is not None:
            try:
                await self._ledger.written(conversation.key)
            except Exception as exc:  # only bookkeeping: the lease must go back regardless
                logger.warning("usage ledger not awaited (%s: %s)", type(exc).__name__, exc)
        await checkout.finish()

    async def _note_compaction(self) -> None:
        """The agent compacted through its own endpoint: its session cools down as after a
        native compaction."""
        exchange, dialect = self.exchange, self.exchange.compaction
        assert dialect is not None
        try:
            data = json.loads(exchange.body)
            _, key = conversation_of(dialect, exchange.path, exchange.headers, data)
            checkout = await self._conversations.checkout(key, dialect.name)
        except Exception:  # only bookkeeping: never fail the request for it
            return
        if checkout.conversation is not None:
            checkout.conversation.session.note_compaction(f"{dialect.name} compact endpoint")
            checkout.changed()
        await checkout.finish()


class UsageSniffer:
    """Reads the prompt size a response reports while it is relayed, without holding it back.

    Streams: the first event whose usage gives the prompt's size, as the format reads its
    events (Anthropic's ``message_start``, the Responses ``response.completed``, a Chat
    Completions chunk's ``usage``). A JSON answer is read whole (up to a limit) once it has been
    relayed, with ``prompt_tokens`` (the format's own reader by default). Compressed answers are
    not read.

    Beside that prompt size (what :meth:`finish` returns, for the session), :attr:`usage` is the
    full usage of the answer (:class:`~.usage.ProviderUsage`: cache reads and
    writes, output, dropped thinking), read to the end of a stream, for the usage ledger.
    """

    def __init__(
        self, api: str | None, prompt_tokens: Callable[[Any], int | None] | None = None
    ) -> None:
        self.api = api
        dialect = DIALECTS.get(api) if api is not None else None
        if prompt_tokens is None and dialect is not None:
            prompt_tokens = dialect.prompt_tokens
        self._prompt_tokens = prompt_tokens or (lambda answer: None)
        # Lines without these are no usage event: they are not parsed.
        self._marks = dialect.usage_marks if dialect is not None else ()
        self._pending = b""
        self._json = bytearray()
        self._stream = StreamUsage(api)
        self._whole: ProviderUsage | None = None
        self.streaming = False
        self.found: int | None = None

    @property
    def usage(self) -> ProviderUsage | None:
        """The answer's full usage, once :meth:`finish` ran (``None`` when none was read)."""
        return self._stream.result() if self.streaming else self._whole

    def feed(self, chunk: bytes) -> None:
        if self.found is not None and (not self.streaming or self._stream.complete):
            return
        if not self.streaming:
            if len(self._json) + len(chunk) <= MAX_SNIFF_BYTES:
                self._json.extend(chunk)
            return
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        if len(self._pending) > MAX_SNIFF_BYTES:
            self._pending = b""
        for line in lines:
            if line.startswith(b"data:") and any(mark in line for mark in self._marks):
                self._event(line[5:].strip())

    def _event(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        self._stream.event(event)
        if self.found is None:
            self.found = self._stream.prompt_tokens

    def finish(self) -> int | None:
        if self.found is None and not self.streaming and self._json:
            try:
                data = json.loads(self._json)
            except ValueError:
                return None
            self._json = bytearray()
            if self.api is not None:
                self._whole = usage_from_json(self.api, data)
            try:
                self.found = self._prompt_tokens(data)
            except (ValueError, TypeError, AttributeError):
                return None
        return self.found
