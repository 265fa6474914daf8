"""The rewrite step on its own: what it reads, and failing open after the checkout."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from dialect_fixtures import claude_code_request
from tomc._gateway.proxy.exchange import Exchange
from tomc._gateway.proxy.options import RequestOptions, new_session
from tomc._gateway.proxy.rewrite import prepare
from tomc._gateway.proxy.store.memory import LocalConversations, MemorySessionStore
from tomc._gateway.settings import GatewaySettings
from tomc.chat.dialects import DIALECTS


def exchange(body: bytes, dialect: str | None) -> Exchange:
    found = DIALECTS[dialect] if dialect else None
    return Exchange(
        method="POST" if dialect else "GET",
        path="/v1/messages" if dialect else "/v1/models",
        url="http://upstream",
        items=(),
        headers={},
        options=RequestOptions(),
        body=body,
        dialect=found,
    )


def test_a_request_in_no_known_format_is_never_read(caplog: pytest.LogCaptureFixture):
    store = MemorySessionStore(new_session)
    with caplog.at_level(logging.INFO, logger="tomc.gateway"):
        done, checkout = asyncio.run(
            prepare(exchange(b"not json", None), LocalConversations(store), GatewaySettings())
        )
    assert done.body == b"not json" and checkout is None and len(store) == 0
    assert not caplog.records  # no "not JSON" for a body that was only forwarded


def test_a_session_that_fails_sends_the_original_and_records_a_gateway_error():
    class Broken:
        def prepare_request(self, *args, **kwargs):
            raise RuntimeError("a bug")

    store = MemorySessionStore(Broken)  # type: ignore[arg-type]
    raw = json.dumps(claude_code_request(6, thinking=False)).encode()
    done, checkout = asyncio.run(
        prepare(exchange(raw, "messages"), LocalConversations(store), GatewaySettings())
    )
    assert done.body == raw and done.decision is None and checkout is not None
    (record,) = store.conversations()
    assert record.failures == 1 and record.last_code == "gateway_error"
